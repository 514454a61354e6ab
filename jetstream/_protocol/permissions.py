"""Server permission blocks for least-privilege users (the shape of a nats-server
``authorization { users = [{permissions: ...}] }`` entry and of a user JWT's ``pub``/``sub``).

NATS permissions match subjects by token, so they can confine a user to streams, subjects and
inboxes, but never to a request's JSON body (``STREAM.PURGE`` filters, ``DIRECT.GET`` queries)
or to a published message's headers (``Nats-Rollup``). The templates built on this module grant
only subject-enforceable rights and the documents say what each one still allows
(``docs/SECURITY.md``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from .._errors import ClientValidationError
from .names import validate_name

__all__ = ["API", "Permissions", "SubjectRule", "consumer_rights", "inbox_subjects"]

API = "$JS.API"
"""The JetStream API prefix of the account's own domain."""


class SubjectRule(msgspec.Struct, frozen=True, omit_defaults=True):
    """Subjects a user may (``allow``) and may not (``deny``) use; deny wins."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


class Permissions(msgspec.Struct, frozen=True, omit_defaults=True):
    """One user's rights: what it may publish to and subscribe to. ``as_config()`` gives the
    plain mapping a server configuration (or ``nsc``/JWT tooling) takes."""

    publish: SubjectRule
    subscribe: SubjectRule

    def as_config(self) -> dict[str, Any]:
        """The permission block as plain dicts and lists, ready for JSON or a server config
        file's ``permissions`` entry."""
        config: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(self))
        return config  # lists, as JSON and the server's config take them


def inbox_subjects(inbox_prefix: str) -> tuple[str, ...]:
    """The subscription right for replies: only the user's own inbox prefix, so one user can
    never read the replies sent to another (a shared ``_INBOX.>`` would allow that).

    Give no user a prefix that another user's prefix starts with (``_INBOX_a`` and
    ``_INBOX_a.b``): the first would read the second's replies.

    Raises:
        ClientValidationError: the prefix is empty, has wildcards or whitespace, starts with
            ``$`` (``$KV`` would subscribe to every bucket write), or is the shared ``_INBOX``.
    """
    tokens = inbox_prefix.split(".") if isinstance(inbox_prefix, str) else [""]
    if not all(_is_literal_token(token) for token in tokens):
        raise ClientValidationError(
            f"inbox_prefix must be literal subject tokens (no wildcards, spaces): {inbox_prefix!r}"
        )
    if inbox_prefix.startswith("$"):
        raise ClientValidationError(
            f"inbox_prefix must not start with '$' (system and stream subjects): {inbox_prefix!r}"
        )
    if inbox_prefix == "_INBOX":
        raise ClientValidationError(
            "inbox_prefix must be the user's own (e.g. '_INBOX_alice'); the shared '_INBOX' "
            "would let every user read every other user's replies"
        )
    return (f"{inbox_prefix}.>",)


def consumer_rights(stream: str, filter_subject: str) -> tuple[str, ...]:
    """Create filtered consumers on ``stream`` (only with a filter inside ``filter_subject``:
    the server checks the filtered create subject against the request), pull from them and
    delete them. Consumer names are one subject token, so the rights cover every consumer name
    of the stream; the library's names are random and never listed, protect known durable
    names with :func:`protected_consumers`."""
    return (
        f"{API}.CONSUMER.CREATE.{stream}.*.{filter_subject}",
        f"{API}.CONSUMER.MSG.NEXT.{stream}.*",
        f"{API}.CONSUMER.DELETE.{stream}.*",
    )


def protected_consumers(stream: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """Deny every API call on the named (durable) consumers of ``stream``: a reader must not
    pull from, reconfigure or delete a work queue or consumer group that shares the stream.

    Raises:
        InvalidNameError: not a consumer name.
    """
    denied: list[str] = []
    for name in names:
        validate_name(name, "consumer")
        denied += [
            f"{API}.CONSUMER.CREATE.{stream}.{name}",
            f"{API}.CONSUMER.CREATE.{stream}.{name}.>",
            f"{API}.CONSUMER.DURABLE.CREATE.{stream}.{name}",
            f"{API}.CONSUMER.INFO.{stream}.{name}",
            f"{API}.CONSUMER.MSG.NEXT.{stream}.{name}",
            f"{API}.CONSUMER.DELETE.{stream}.{name}",
        ]
    return tuple(denied)


def _is_literal_token(token: str) -> bool:
    return bool(token) and not any(c in "*>." or c.isspace() or ord(c) < 32 for c in token)
