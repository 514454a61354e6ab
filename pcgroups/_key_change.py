"""One change of a bucket as a watch-group member receives it (:class:`KeyChange`), rebuilt
from the copy the group's work-queue stream sourced from ``KV_<bucket>``.

Sourcing keeps the message's subject (after the partition token), payload and headers
(``KV-Operation``, ``Nats-Marker-Reason``, ``Nats-TTL``, ``Jetstore-Enc``...; the server drops
only ``Nats-Expected-*`` and ``Nats-Batch-*``) and adds ``Nats-Stream-Source``, whose second
field is the message's sequence in the bucket's stream: its revision. So the bucket decodes a
change exactly as :meth:`kvstore.Bucket.watch` decodes an entry (docs/PCGROUPS-WIRE.md
section 12).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Final

from jetstream import DurationValue, JetStreamError
from jetstream._protocol.message import parse_ack_reply
from kvstore import Bucket, Entry, KeyDecodeError, Op

from ._message import GroupMessage

__all__ = ["SOURCE_HEADER", "KeyChange", "key_change", "origin_revision"]

SOURCE_HEADER: Final = "Nats-Stream-Source"
"""Set by the server on every sourced message: ``<stream> <seq> <filter> <dest> <subject>
[<ident>]`` (nats-server 2.10+; older servers put the origin's ack reply subject there)."""
_log = logging.getLogger("pcgroups")


def origin_revision(headers: dict[str, str]) -> int | None:
    """The sequence a sourced message had in its origin stream (for a bucket: the
    revision), from its ``Nats-Stream-Source`` header; None without a readable one."""
    text = headers.get(SOURCE_HEADER, "")
    if text.startswith("$JS.ACK."):  # the pre-2.10 form: the origin delivery's ack reply
        try:
            return parse_ack_reply(text).stream_seq
        except ValueError:
            return None
    fields = text.split(" ")
    if len(fields) < 2 or not fields[1].isdigit() or int(fields[1]) < 1:
        return None
    return int(fields[1])


class KeyChange:
    """One change of a key: a put, a delete or purge tombstone, or a server expiry marker.

    ``key``, ``revision`` and ``op`` are those :meth:`kvstore.Bucket.watch` reports for the
    same change (``revision`` is the bucket's, not the work queue's sequence). ``value`` went
    through the bucket's value stages (decrypted); if it does not open, reading ``value``
    raises the bucket's error (``DecryptionError``...) and the change can still be settled.
    Settle every change with :meth:`ack` (or :meth:`nak` / :meth:`term`): with the default
    ``max_ack_pending`` of 1 the member's next change is delivered only then (an unsettled one
    comes again after ``ack_wait``).
    """

    __slots__ = ("_entry", "_error", "created", "key", "message", "op", "revision")

    def __init__(
        self,
        message: GroupMessage,
        *,
        key: str,
        revision: int,
        op: Op,
        created: datetime,
        entry: Entry | None,
        error: JetStreamError | None = None,
    ) -> None:
        self.message = message
        """The work-queue message (partition, headers, delivery count in ``raw.metadata``)."""
        self.key = key
        """The user key (decoded by the bucket's key codec)."""
        self.revision = revision
        """The revision in the bucket (``KV_<bucket>`` sequence)."""
        self.op = op
        """``Op.PUT``, ``Op.DELETE``, ``Op.PURGE`` or ``Op.EXPIRED`` (as ``bucket.watch``)."""
        self.created = created
        """When the change entered the group's work queue (UTC). The server does not carry
        the write's own time across sourcing; while sourcing keeps up it is milliseconds
        after the write."""
        self._entry = entry
        self._error = error

    @property
    def value(self) -> bytes:
        """The value (empty for tombstones and markers).

        Raises:
            DecryptionError: (encrypted bucket) it does not open with the bucket's keyring.
        """
        if self._error is not None:
            raise self._error
        assert self._entry is not None
        return self._entry.value

    @property
    def entry(self) -> Entry:
        """The change as a :class:`kvstore.Entry` (``delta`` is None).

        Raises:
            DecryptionError: as :attr:`value`.
        """
        if self._error is not None:
            raise self._error
        assert self._entry is not None
        return self._entry

    @property
    def partition(self) -> int:
        """The group partition of the key."""
        return self.message.partition

    @property
    def delivered(self) -> int:
        """How many times this change was delivered (> 1: a redelivery)."""
        return self.message.raw.metadata.delivered

    async def ack(self) -> None:
        """Done with this change: it is never delivered again (with the watch's
        ``confirm_acks``, returns once the server has applied it).

        Raises:
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
            RequestTimeoutError: (``confirm_acks``) no confirmation within 5 s; the change
                may come again.
        """
        await self.message.ack()

    async def nak(self, delay: DurationValue | None = None) -> None:
        """Deliver this change again (to this member, or whoever owns the key then), after
        ``delay`` (seconds or a timedelta) if given; nothing newer of its key comes first
        while ``max_ack_pending`` is 1.

        Raises:
            ClientValidationError: ``delay`` negative or not a duration (nothing is sent).
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
        """
        await self.message.nak(delay)

    async def term(self) -> None:
        """Drop this change without processing it (never delivered again; confirmed as
        :meth:`ack` is).

        Raises:
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
            RequestTimeoutError: (``confirm_acks``) no confirmation within 5 s.
        """
        await self.message.term()

    async def in_progress(self) -> None:
        """Still working on it: resets the ack timer.

        Raises:
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
        """
        await self.message.in_progress()

    def __repr__(self) -> str:
        return f"<KeyChange {self.op.name} {self.key!r} rev {self.revision} p{self.partition}>"


async def key_change(bucket: Bucket, message: GroupMessage) -> KeyChange | None:
    """The change ``message`` carries, or None for a message that is no change of this
    bucket (no origin revision, another stream's subject, a key its codec cannot decode):
    such a message is terminated and logged, as ``bucket.watch`` skips foreign keys.

    Raises:
        ConnectionClosedError, DisconnectedError: terminating a skipped message failed.
    """
    raw = message.raw
    revision = origin_revision(message.headers)
    created = raw.metadata.time
    if revision is None:
        await _skip(bucket, message, f"no origin revision in {SOURCE_HEADER}")
        return None
    try:
        entry = bucket.decode_entry(
            message.subject,
            message.data,
            revision=revision,
            created=created,
            headers=message.headers,
        )
    except KeyDecodeError as exc:
        await _skip(bucket, message, str(exc))
        return None
    except JetStreamError as exc:  # the value stages refused the value: only puts have one
        stored = message.subject.removeprefix(f"$KV.{bucket.name}.")
        key = getattr(exc, "key", None) or stored
        return KeyChange(
            message, key=key, revision=revision, op=Op.PUT, created=created, entry=None, error=exc
        )
    return KeyChange(
        message, key=entry.key, revision=revision, op=entry.op, created=created, entry=entry
    )


async def _skip(bucket: Bucket, message: GroupMessage, why: str) -> None:
    _log.warning("bucket %r: skipping %s, not a change: %s", bucket.name, message, why)
    await message.term()
