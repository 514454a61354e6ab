"""``jetstream._transport.denials.Denials``: a refused reply inbox is remembered (later
requests fail at once) until it is pardoned (subscribed again after a reconnect)."""

from __future__ import annotations

from jetstream import PermissionDeniedError
from jetstream._transport.denials import Denials

INBOX = "_INBOX.AbC123.*"


def test_a_refused_inbox_is_remembered_until_pardoned() -> None:
    denials = Denials()
    told: list[PermissionDeniedError] = []
    denials.watch("$JS.API.INFO", told.append)
    error = Exception(f'nats: permissions violation for subscription to "{INBOX.lower()}"')
    assert denials.note(error)
    assert told and "inbox" in str(told[0]), "every waiting request hears of it"
    refused = denials.recent([INBOX])
    assert isinstance(refused, PermissionDeniedError) and "subscribe" in str(refused)
    denials.pardon(INBOX)
    assert denials.recent([INBOX]) is None
    denials.pardon(INBOX)  # pardoning twice, or what was never refused, is harmless


def test_other_errors_are_not_refusals() -> None:
    denials = Denials()
    assert not denials.note(Exception("nats: stale connection"))
    assert denials.recent([INBOX]) is None
