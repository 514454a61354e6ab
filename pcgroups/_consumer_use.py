"""Whether an instance may be working with a member's consumer, read from its consumer info,
and how that consumer's settings differ from an instance's own. No I/O.

An instance finds the member's consumer holding another config when the member's partitions
changed (the previous consumer is still there) or when another instance of the member runs
with other settings (a rolling upgrade changing ``ack_wait``, say). It replaces that consumer
only when no instance uses it: deleting (or reconfiguring) a consumer under an instance that
works on one of its messages would hand that message to a second instance at once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Final

import msgspec

from jetstream import ConsumerConfig, ConsumerInfo

__all__ = ["ack_wait_of", "consumer_in_use", "pins", "server_now", "settings_differences"]

_SERVER_ACK_WAIT: Final = timedelta(seconds=30)  # the server's default (consumer.go)
_NOT_SETTINGS: Final = frozenset({"name", "durable_name", "filter_subject", "filter_subjects"})


def consumer_in_use(info: ConsumerInfo, *, bound: datetime | None, pin: str) -> str | None:
    """Why an instance may be working with the consumer of ``info`` now, or None when none
    can be. ``bound`` is when the consumer this instance used last was created and ``pin``
    its pin on it: what this instance did itself does not count. In use means (by the
    server's clock, ``info.ts``):

    - another instance holds the pin;
    - an instance has a pull waiting (the server counts only pulls whose inbox still has a
      subscriber: an instance that is gone or stopped pulling has none);
    - a message was delivered less than the consumer's ``ack_wait`` ago and is not
      acknowledged yet (its handler may still run; after ``ack_wait`` the server gives it
      out again anyway);
    - another instance created the consumer less than ``ack_wait`` ago and it has delivered
      nothing yet (the creator's first pull may be on its way; once it has delivered, its
      instances hold the pin and pull).
    """
    now = server_now(info)
    ack_wait = ack_wait_of(info)
    if pins(info) - {pin}:
        return "another instance holds the pin"
    if info.num_waiting:
        return f"{info.num_waiting} pull(s) waiting"
    last = info.delivered.last_active
    if info.num_ack_pending and last is not None and now - last < ack_wait:
        return f"{info.num_ack_pending} message(s) delivered and not acknowledged"
    created = info.created
    fresh = created is not None and created != bound and now - created < ack_wait
    if fresh and not info.delivered.consumer_seq:
        return "just created by another instance"
    return None


def pins(info: ConsumerInfo) -> set[str]:
    """The pins the server holds on the consumer's priority groups now."""
    return {g.pinned_client_id for g in info.priority_groups or () if g.pinned}


def server_now(info: ConsumerInfo) -> datetime:
    """The server's time of ``info`` (its pause deadlines are by its clock)."""
    return info.ts or datetime.now(UTC)


def ack_wait_of(info: ConsumerInfo) -> timedelta:
    """The consumer's ``ack_wait``, the server's default where it reports none."""
    return (info.config.ack_wait if info.config else None) or _SERVER_ACK_WAIT


def settings_differences(existing: ConsumerConfig, desired: ConsumerConfig) -> list[str]:
    """What ``existing`` (a consumer's config as the server reports it) has otherwise than
    ``desired`` (an instance's), filters aside: ``["ack_wait 2s (this instance: 3s)"]``.
    Fields ``desired`` leaves unset are the server's defaults and not compared."""
    differences = []
    defaults = ConsumerConfig()
    for name in desired.__struct_fields__:
        ours = getattr(desired, name)
        if name in _NOT_SETTINGS or ours == getattr(defaults, name):
            continue
        theirs = getattr(existing, name)
        if name == "metadata":  # the server adds its own _nats.* keys
            theirs = {k: v for k, v in (theirs or {}).items() if not k.startswith("_nats.")}
        if theirs != ours:
            differences.append(f"{name} {_shown(theirs)} (this instance: {_shown(ours)})")
    return differences


def _shown(value: Any) -> str:
    """A setting for a log line: another client's strings are repr'd (no line breaks)."""
    if isinstance(value, timedelta):
        return f"{value.total_seconds():g}s"
    if isinstance(value, list):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    value = msgspec.to_builtins(value)
    return repr(value) if isinstance(value, str) else str(value)
