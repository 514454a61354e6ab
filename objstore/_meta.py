"""Meta records: read one with its stream sequence and remaining TTL, and rewrite it only if it
is still the record that was read.

Every write of ``$O.<store>.M.<name>`` (an upload's commit, ``update_meta``, rename, links,
``delete``'s tombstone) carries ``Nats-Expected-Last-Subject-Sequence`` = the sequence of the
record it was computed from (0: no record). A concurrent writer in between makes the server
refuse it (10071) and nothing is stored; the caller reads again and decides again, a bounded
number of times (:class:`ObjectChangedError` after that). So no rewrite can bring back a
record another writer replaced, and whoever replaces a record knows exactly which one it
replaced (and whose chunks to purge).

Lost acks: the server checks ``Nats-Msg-Id`` before the expected sequence (nats-server
``processJetStreamMsg``), so a resend of a stored write is answered as a duplicate, and
:meth:`JetStream.publish` looks the id up when a resend fails the sequence check instead. A
write refused for its sequence was not stored, so the next try takes a fresh id.

TTL: a rewrite keeps the time the record has left (its ``Nats-TTL`` minus its age, whole
seconds rounded down, so the meta record goes no later than the chunks written before it).
With less than a second left the object counts as expired: it is not rewritten.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import msgspec

from jetstream import (
    NEVER,
    ClientValidationError,
    InvalidTTLError,
    MessageNotFoundError,
    StoredMessage,
    ValueTooLargeError,
    WrongLastSequenceError,
)
from jetstream import headers as hdr
from jetstream._protocol.limits import check_message_size, check_subject_length
from jetstream._protocol.ttl import format_ttl, parse_ttl_header

from ._core import StoreCore
from ._errors import InvalidObjectMetaError, InvalidObjectNameError, ObjectChangedError
from ._finish import CallerGone, stop_if_gone
from ._models import ObjectInfo, encode_info, meta_subject
from ._trust import info_from_message

__all__ = [
    "MetaRecord",
    "attempts",
    "check_record_fits",
    "read_record",
    "remaining_ttl",
    "replace_record",
    "write_record",
]

_ATTEMPTS = 16
"""Reads and conditional writes per call; each conflict means another writer got through."""


@dataclasses.dataclass(frozen=True)
class MetaRecord:
    """A name's newest meta record: what it says, where it is, and the TTL a rewrite keeps
    (``ttl_headers`` empty: no TTL; ``expiring``: under a second left, treat as gone)."""

    info: ObjectInfo
    seq: int
    ttl_headers: dict[str, str]
    expiring: bool = False
    readable: bool = True
    """False: read without ``strict`` from a record that failed its checks (``info`` is then
    a stand-in deleted record; nothing it names may be used)."""

    @property
    def live(self) -> bool:
        """An object (or link) that exists and is not about to expire."""
        return not self.info.deleted and not self.expiring


def attempts(what: str) -> Iterator[int]:
    """``for _ in attempts("update of 'x'")``: the bounded retry loop of a conditional rewrite.

    Raises:
        ObjectChangedError: once every attempt met a concurrent write.
    """
    yield from range(_ATTEMPTS)
    raise ObjectChangedError(
        f"{what}: the meta record changed under each of {_ATTEMPTS} attempts; nothing written"
    )


def remaining_ttl(message: StoredMessage, now: datetime | None = None) -> dict[str, str] | None:
    """The ``Nats-TTL`` header a rewrite of ``message`` carries so it expires when ``message``
    would have: ``{}`` without a TTL, None when less than a second is left.

    The age is measured against the server's timestamp with the local clock; a clock ahead of
    the server's makes the rewrite expire early (never late).
    """
    text = message.headers.get(hdr.TTL)
    if text is None:
        return {}
    try:
        seconds = parse_ttl_header(text)
    except InvalidTTLError:  # the server would not have stored it; nothing to keep
        return {}
    if seconds == NEVER:
        return {hdr.TTL: format_ttl(NEVER)}
    age = ((now or datetime.now(UTC)) - message.time).total_seconds()
    left = math.floor(seconds - max(age, 0.0))
    return {hdr.TTL: format_ttl(left)} if left >= 1 else None


async def read_record(store: StoreCore, name: str, *, strict: bool = True) -> MetaRecord | None:
    """The newest record of ``name`` read from the stream leader (a replica may lag, and the
    sequence is what the next write is conditional on); None if the subject is empty.
    Without ``strict`` an unreadable record reads as a deleted one (to be written over).

    Raises:
        InvalidObjectMetaError: the record is unreadable (``strict``); JetStreamError: the
            read failed.
    """
    try:
        message = await store.js.get_last_message(
            store.stream, meta_subject(store.name, name), direct=False
        )
    except MessageNotFoundError:
        return None
    try:
        info = info_from_message(store.name, message.subject, message.data, message.headers)
    except InvalidObjectMetaError:
        if strict:
            raise
        # Its chunks, if any, are unknown: cleanup() finds them once this record is gone.
        info = info_from_message(store.name, message.subject, b"", {})
        ttl = remaining_ttl(message)
        return MetaRecord(info=info, seq=message.seq, ttl_headers=ttl or {}, readable=False)
    ttl = remaining_ttl(message)
    return MetaRecord(info=info, seq=message.seq, ttl_headers=ttl or {}, expiring=ttl is None)


async def write_record(
    store: StoreCore, info: ObjectInfo, ttl_headers: dict[str, str], *, expected: int, msg_id: str
) -> int:
    """Store ``info`` as the record of its name if the subject's last sequence is still
    ``expected`` (0: no record); returns its sequence.

    Raises:
        WrongLastSequenceError: another write came first (nothing stored);
        JetStreamError: as :meth:`JetStream.publish`.
    """
    subject = meta_subject(store.name, info.name)
    headers = _record_headers(ttl_headers, expected)
    ack = await store.js.publish(subject, encode_info(info), headers=headers, msg_id=msg_id)
    return ack.seq


def _record_headers(ttl_headers: dict[str, str], expected: int) -> dict[str, str]:
    return {
        hdr.ROLLUP: hdr.ROLLUP_SUBJECT,  # a meta record replaces the previous ones of its name
        hdr.EXPECTED_LAST_SUBJECT_SEQUENCE: str(expected),
        **ttl_headers,
    }


def check_record_fits(store: StoreCore, draft: ObjectInfo, ttl_headers: dict[str, str]) -> None:
    """Refuse, before any chunk is sent, an upload whose record would not fit the server's
    max_payload once it is done: ``draft`` with the fields the upload fills in (size, chunks,
    digest, time) and the write's headers at their longest. A record within a few dozen bytes
    of the limit is refused although it might have fitted.

    Raises:
        InvalidObjectNameError: the name is too long for the record's subject.
        ValueTooLargeError: the record (name, description, headers, metadata) is too large.
    """
    longest = msgspec.structs.replace(
        draft, size=_LONGEST, chunks=_LONGEST, digest=_LONGEST_DIGEST, mtime=_LONGEST_MTIME
    )
    headers = _record_headers(ttl_headers, _LONGEST)
    headers[hdr.MSG_ID] = f"{draft.nuid}-{_ATTEMPTS}"  # replace_record's retries add "-N"
    subject = meta_subject(store.name, draft.name)
    try:
        check_subject_length(store.js.nc, subject)
    except ClientValidationError as exc:
        raise InvalidObjectNameError(
            f"object name of {len(draft.name.encode())} bytes is too long to store: {exc}"
        ) from None
    try:
        check_message_size(store.js.nc, subject, headers, len(encode_info(longest)))
    except ValueTooLargeError as exc:
        raise ValueTooLargeError(
            f"the meta record of object {draft.name[:80]!r} (name, description, headers and "
            f"metadata) would not fit: {exc}"
        ) from None


_LONGEST = 2**63 - 1  # a stream sequence, object size or chunk count
_LONGEST_DIGEST = "SHA-256=" + "A" * 43 + "="
_LONGEST_MTIME = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


async def replace_record(
    store: StoreCore,
    info: ObjectInfo,
    ttl_headers: dict[str, str],
    *,
    msg_id: str,
    in_doubt: list[str],
    known: MetaRecord | None,
    caller_gone: CallerGone = lambda: False,
    check: Callable[[MetaRecord | None], None] = lambda record: None,
) -> ObjectInfo | None:
    """Make ``info`` the record of its name whatever is there (an upload's commit: the last
    writer wins) and return the record it replaced (None if none), read right before the write
    that succeeded, so its chunks, and only those, can be purged.

    ``known`` is the record read before the upload began: the first write is conditional on
    it (no extra read on the way to the commit); after a conflict the record is read again,
    and ``check`` may refuse it by raising (nothing is written then).
    ``in_doubt`` receives the ``Nats-Msg-Id`` of a write whose outcome is unknown when this
    raises (empty: nothing was stored). The first try uses ``msg_id``, later ones ``msg_id-N``.

    Raises:
        ObjectChangedError: every attempt met a concurrent write; JetStreamError: as
            :func:`write_record`.
    """
    for attempt in attempts(f"upload of {info.name!r}"):
        replaced = known if attempt == 0 else await read_record(store, info.name, strict=False)
        if attempt:
            check(replaced)
        stop_if_gone(attempt, caller_gone, f"upload of {info.name!r}")
        attempt_id = msg_id if attempt == 0 else f"{msg_id}-{attempt}"
        in_doubt[:] = [attempt_id]
        try:
            await write_record(
                store,
                info,
                ttl_headers,
                expected=replaced.seq if replaced else 0,
                msg_id=attempt_id,
            )
        except WrongLastSequenceError:
            in_doubt.clear()  # refused: not stored
            continue
        in_doubt.clear()
        return replaced.info if replaced is not None else None
    raise AssertionError("unreachable: attempts() raises when exhausted")  # pragma: no cover
