"""AtomicBatch: ADR-50 atomic batch publish, with every outcome resolved (never "maybe").

Messages are collected and validated locally, then sent at commit: the first as a request (so
a stream without ``allow_atomic`` fails fast), the middle ones without a reply (or with one
every ``ack_every`` messages) in slices, so the server stages one slice while the client
prepares the next, the last with ``Nats-Batch-Commit: 1`` (or an extra ``eob`` message) as a
request whose reply is the pub ack. Payloads queued unsealed (an encrypted bucket's values) are
sealed during that send, mostly while the first message's reply is on its way.

**In-doubt commits.** The last message carries a ``Nats-Msg-Id`` derived from the batch id. If
the commit's reply is lost (a timeout after the commit left), the whole batch is sent again
under a *new* batch id with the *same* message id, until it gets a definite answer or the
deadline passes. The resend is a fence: the server checks message ids for the whole batch at
commit, so if the first attempt committed, the resend is refused as a duplicate (10201) or fails
its expected-sequence checks, and a lookup by that message id finds the stored batch (stored
messages keep ``Nats-Batch-Id``/``-Sequence``, which confirm it is contiguous); if it did not,
the resend itself commits and the first can no longer commit after it. Only when the server stays
unreachable until the deadline does the caller get :class:`CommitUnknownError`.

One id per batch suffices for the fence; an id on every message would cost the server a dedupe
entry per message (about 20% of a 1000-message commit). The fence holds for the stream's
duplicate window (2 min by default; KV buckets with a shorter ``max_age`` use that).
"""

from __future__ import annotations

import asyncio
import enum
import functools
import re
from collections.abc import Callable, Coroutine
from typing import Any, Literal

import msgspec
from nats.nuid import NUID

from .. import headers as hdr
from .._api.client import ApiClient, Feature
from .._api.direct_get import get_message
from .._api.retries import probe
from .._api.streams import stream_for_subject, subject_has_stream
from .._consume.scan import find_by_msg_id
from .._errors import (
    BatchAbandonedError,
    BatchClosedError,
    BatchProtocolError,
    BatchTooLargeError,
    ClientValidationError,
    CommitUnknownError,
    DisconnectedError,
    DuplicateMessageIdError,
    InvalidHeaderError,
    JetStreamError,
    MessageNotFoundError,
    NoRespondersError,
    PermissionDeniedError,
    RequestTimeoutError,
    ServerError,
    TooManyInflightBatchesError,
    UnavailableError,
    check_bytes_like,
    check_count,
)
from .._protocol.json_api import decode_reply
from .._protocol.limits import check_message_size, check_subject_length, header_lines_size
from .._protocol.message import StoredMessage
from .._protocol.models import PubAck
from .._resource import AsyncResource
from .._transport.hpub import header_lines, hpub_frame, publish_encoded
from .fence import Fence

__all__ = [
    "DEFAULT_COMMIT_DEADLINE",
    "DEFAULT_MAX_BATCH",
    "AtomicBatch",
    "BatchAck",
    "batch_header_size",
]

DEFAULT_MAX_BATCH = 1000
"""The server's default ``max_batch_size``; configurable per batch for servers set otherwise."""

DEFAULT_COMMIT_DEADLINE = 30.0
"""Seconds to keep resolving a commit (a leader election takes 4-12 s)."""

_MAX_ID_LENGTH = 64
_SUBJECT = re.compile(r"[^\s*>.]+(\.[^\s*>.]+)*")
_RESERVED = frozenset({hdr.BATCH_ID, hdr.BATCH_SEQUENCE, hdr.BATCH_COMMIT})
# Transient: the batch surely did not commit in this attempt, or we cannot tell yet.
_RETRYABLE = (
    NoRespondersError,
    UnavailableError,
    RequestTimeoutError,
    BatchAbandonedError,
    TooManyInflightBatchesError,
    DisconnectedError,  # reconnecting, or its buffer full: the frames were not sent
)


class BatchAck(msgspec.Struct, frozen=True):
    """A committed batch: its stream sequences are ``first_seq`` .. ``last_seq``, in the order
    the messages were added. ``resolved`` is True when the outcome had to be resolved after a
    lost commit reply (``batch_id`` is then the id under which it was stored)."""

    stream: str
    batch_id: str
    first_seq: int
    last_seq: int
    count: int
    resolved: bool = False

    @property
    def sequences(self) -> list[int]:
        """The stream sequence of each message, in the order they were added."""
        return list(range(self.first_seq, self.last_seq + 1))


class _State(enum.Enum):
    OPEN = "open"
    COMMITTING = "committing"
    COMMITTED = "committed"
    ABANDONED = "abandoned"
    FAILED = "failed"


class _Message(msgspec.Struct, frozen=True):
    subject: str
    data: bytes
    headers: dict[str, str]
    msg_id: str
    lines: bytes
    """``headers`` as HPUB header lines, encoded once (resends reuse them)."""
    unsealed: bool = False
    """``data`` still goes through the batch's ``seal`` before it is sent."""


class AtomicBatch(AsyncResource):
    """An all-or-nothing group of messages to one stream (ADR-50 atomic batch publish).

    ::

        async with AtomicBatch(js, stream="ORDERS") as batch:
            batch.add("orders.1", b"...")
            batch.add("orders.2", b"...", headers={"Nats-Expected-Last-Subject-Sequence": "0"})
        print(batch.ack.sequences)

    Exiting the block normally commits; an exception abandons (nothing is sent). ``commit()``
    may also be awaited directly. ``stream`` is needed only to resolve a lost commit reply and is
    looked up from the first subject when not given.

    Options: ``max_messages`` (client-side limit, default 1000 like the server's
    ``max_batch_size``), ``ack_every`` (ask for a reply every N messages, for flow control on
    big batches), ``commit_with`` (``"last"``: the last message carries the commit; ``"eob"``:
    an extra empty end-of-batch message, server 2.14+), ``timeout`` (per request, default the
    context's), ``deadline`` (seconds to keep resolving an in-doubt commit, default 30),
    ``seal`` and ``seal_overhead`` (for kvstore's encrypted batches: ``seal(subject, data)``
    makes the payload of each message queued unsealed, once, as the batch is sent; its size is
    checked with ``seal_overhead`` bytes more).

    Raises (on construction):
        ClientValidationError: an option of the wrong type or out of range (also a
            ``ValueError``).
    """

    def __init__(
        self,
        js: ApiClient,
        *,
        stream: str | None = None,
        max_messages: int = DEFAULT_MAX_BATCH,
        ack_every: int | None = None,
        commit_with: Literal["last", "eob"] = "last",
        timeout: float | None = None,
        deadline: float = DEFAULT_COMMIT_DEADLINE,
        seal: Callable[[str, bytes], bytes] | None = None,
        seal_overhead: int = 0,
    ) -> None:
        _check_options(commit_with, seal)
        self._js = js
        self._stream = stream
        self._max_messages = check_count(max_messages, "max_messages", 1)
        self._ack_every = None if ack_every is None else check_count(ack_every, "ack_every", 1)
        self._commit_with = commit_with
        self._timeout = timeout or js.timeout
        self._deadline = deadline
        self._id = _new_batch_id()
        self._messages: list[_Message] = []
        self._msg_ids: set[str] = set()
        self._state = _State.OPEN
        self._commit_sent = False
        self._sent_ids: set[str] = set()  # the batch ids of every attempt
        self._own_fence = False  # the last message's Msg-Id is ours, not the caller's
        # The last headers encoded, and their lines: a batch's messages mostly carry the same
        # headers (none, or an encrypted bucket's key id), encoded once then.
        self._last_lines: tuple[dict[str, str], bytes] = ({}, b"")
        # Messages appended unsealed are sealed while the batch is sent: each slice while the
        # server stages the ones before it, instead of all of them before the first leaves.
        self._seal = seal
        self._seal_overhead = check_count(seal_overhead, "seal_overhead", 0)
        self._unsealed = 0  # messages still to seal
        self.ack: BatchAck | None = None
        """The commit's result, once committed."""

    @property
    def batch_id(self) -> str:
        """The id of the first attempt (a resolved commit may be stored under another)."""
        return self._id

    def __len__(self) -> int:
        return len(self._messages)

    def __repr__(self) -> str:
        return f"<AtomicBatch {self._id} {len(self)} messages {self._state.value}>"

    # -- building -----------------------------------------------------------------------------

    def add(self, subject: str, data: bytes = b"", headers: dict[str, str] | None = None) -> int:
        """Queue one message; return its position (0-based). Nothing is sent until commit.

        Raises:
            BatchClosedError: the batch was committed or abandoned.
            BatchTooLargeError: more than ``max_messages`` messages.
            InvalidHeaderError: batch headers set by hand, ``Nats-Expected-Last-Msg-Id``,
                ``Nats-Expected-Last-Sequence`` after the first message, a repeated
                ``Nats-Msg-Id``, or a header that would break the header block.
            ValueTooLargeError: the message exceeds the server's max payload.
            ClientValidationError: an invalid subject; WrongTypeError: data is not bytes-like.
        """
        self._check_room()
        if not isinstance(subject, str) or not _SUBJECT.fullmatch(subject):
            raise ClientValidationError(f"invalid subject for a batch message: {subject!r}")
        check_bytes_like(data, "data")
        own = dict(headers or {})
        hdr.validate_headers(own)
        self._check_batch_headers(own)
        payload = bytes(data)
        msg_id = own.get(hdr.MSG_ID, "")
        if msg_id:
            if msg_id in self._msg_ids:
                raise InvalidHeaderError(f"Nats-Msg-Id {msg_id!r} is used twice in the batch")
            self._msg_ids.add(msg_id)
        return self._append(subject, payload, own)

    def _append(
        self, subject: str, data: bytes, headers: dict[str, str], *, unsealed: bool = False
    ) -> int:
        """Queue a message whose subject and headers the caller validated (``add``, or
        kvstore's KeyBatch); its size is checked here, with the batch headers it will carry.
        ``unsealed``: ``data`` goes through the batch's ``seal`` when it is sent (its size is
        checked with ``seal_overhead`` added).

        Raises:
            BatchTooLargeError, BatchClosedError, ValueTooLargeError, ClientValidationError.
        """
        self._check_room()
        if unsealed and self._seal is None:
            raise ClientValidationError("an unsealed message needs a batch made with seal=")
        nc = self._js.nc
        check_subject_length(nc, subject)
        lines = self._lines(headers)
        extra = len(lines) + batch_header_size(len(self._messages) + 1)
        size = len(data) + self._seal_overhead if unsealed else len(data)
        check_message_size(nc, subject, None, size, extra_headers=extra)
        msg_id = headers.get(hdr.MSG_ID, "")
        self._messages.append(_Message(subject, data, headers, msg_id, lines, unsealed))
        self._unsealed += unsealed
        return len(self._messages) - 1

    def _lines(self, headers: dict[str, str]) -> bytes:
        last_headers, lines = self._last_lines
        if headers != last_headers:
            lines = header_lines(headers)
            self._last_lines = (headers, lines)
        return lines

    def _check_room(self) -> None:
        self._check_open("add")
        if len(self._messages) >= self._max_messages:
            raise BatchTooLargeError(
                f"a batch holds at most {self._max_messages} messages (max_messages)"
            )

    def _check_batch_headers(self, headers: dict[str, str]) -> None:
        reserved = _RESERVED.intersection(headers)
        if reserved:
            raise InvalidHeaderError(f"batch headers are set by the batch: {sorted(reserved)}")
        if hdr.EXPECTED_LAST_MSG_ID in headers:
            raise InvalidHeaderError("atomic batches do not support Nats-Expected-Last-Msg-Id")
        if self._messages and hdr.EXPECTED_LAST_SEQUENCE in headers:
            raise InvalidHeaderError(
                "only the first message of a batch may carry Nats-Expected-Last-Sequence"
            )

    def abandon(self) -> None:
        """Drop the batch without sending anything (if it was not committed yet)."""
        if self._state is _State.OPEN:
            self._state = _State.ABANDONED

    def _check_open(self, action: str) -> None:
        if self._state is not _State.OPEN:
            raise BatchClosedError(f"cannot {action}: the batch is {self._state.value}")

    # -- context manager ----------------------------------------------------------------------

    async def _enter(self) -> None:
        self._check_open("enter")

    async def _exit(self, error: BaseException | None) -> None:
        if error is not None:
            self.abandon()
        elif self._state is _State.OPEN:
            await self.commit()

    # -- commit -------------------------------------------------------------------------------

    async def commit(self) -> BatchAck:
        """Send and commit the batch; return where it was stored.

        An empty batch commits nothing and returns a zero-count ack.

        Raises:
            BatchClosedError: already committed or abandoned.
            BatchPublishDisabledError: the stream lacks ``allow_atomic``.
            WrongLastSequenceError: an expected-sequence check failed (nothing stored).
            UnsupportedServerFeatureError: ``commit_with="eob"`` on a server before 2.14.
            CommitUnknownError: the outcome could not be learned before the deadline, or (at
                once) no stream takes the batch's subjects any more after an attempt whose
                answer was lost (its stream deleted: whatever it stored went with it).
            NoRespondersError: no stream takes the batch's subjects (nothing stored).
            JetStreamError: any other definite rejection (nothing stored).
        """
        self._check_open("commit")
        self._state = _State.COMMITTING
        try:
            if self._commit_with == "eob":
                await self._js.require(Feature.BATCH_EOB)
            self.ack = await self._commit_resolving()
        except BaseException:
            self._state = _State.FAILED
            raise
        self._state = _State.COMMITTED
        return self.ack

    def _fence(self) -> str:
        """Give the last message a ``Nats-Msg-Id`` (unless it has one): the resend fence."""
        last = self._messages[-1]
        if last.msg_id:
            return last.msg_id
        msg_id = f"{self._id}-{len(self._messages)}"
        self._own_fence = True
        headers = {**last.headers, hdr.MSG_ID: msg_id}
        self._messages[-1] = msgspec.structs.replace(
            last, headers=headers, msg_id=msg_id, lines=header_lines(headers)
        )
        return msg_id

    async def _commit_resolving(self) -> BatchAck:
        """Send until a definite answer; resend behind the fence while in doubt."""
        if not self._messages:
            return BatchAck(self._stream or "", self._id, first_seq=0, last_seq=-1, count=0)
        fence = Fence(self._fence())
        self._check_commit_size()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._deadline
        batch_id = self._id
        while True:
            fence.attempt()
            try:
                ack = await self._send(batch_id)
                return self._checked(ack, batch_id, resolved=fence.in_doubt)
            except DuplicateMessageIdError as exc:
                if not fence.retried:  # the caller's Msg-Id was used before this batch
                    raise
                # An earlier attempt committed, whatever it answered (a leader change can
                # abandon a batch that a quorum already stored).
                found = await self._committed_earlier(deadline)
                if found is not None:
                    return found
                # "Duplicate", yet the leader holds no such batch: after a partition or an
                # election a server that has not caught up may say either. Ask again (a resend
                # that commits settles it too) until the deadline.
                if loop.time() >= deadline:
                    why = "committed, but its messages are no longer stored"
                    raise self._unknown(why) from exc
            except _RETRYABLE as exc:
                denied = self._js.denials.recent(m.subject for m in self._messages)
                if denied is not None:  # a refused message leaves a gap: it can never commit
                    raise denied from exc
                # Once the commit left, silence, an earlier attempt still in flight (10158) or
                # an abandon are ambiguous; a 503 or a send that never left is a definite
                # "not stored".
                fence.failed(exc, left=self._commit_sent)
                if await self._nobody_listens(exc):  # e.g. its bucket was deleted
                    if fence.in_doubt:  # stored or not, in a stream gone: nothing to wait for
                        why = f"no stream takes its subjects any more: {exc}"
                        raise self._unknown(why) from exc
                    raise  # a definite "not stored", now
                if loop.time() >= deadline:
                    if fence.in_doubt:
                        raise self._unknown(
                            f"no definite answer before the deadline: {exc}"
                        ) from exc
                    raise
            except ServerError:
                # A refused retry: the earlier attempt may be what made this one fail.
                found = await fence.settle(functools.partial(self._find_stored, deadline))
                if found is not None:
                    return found
                raise
            await asyncio.sleep(min(0.1 * 2**fence.attempts, 2.0, max(0.0, deadline - loop.time())))
            batch_id = _new_batch_id()

    async def _nobody_listens(self, exc: Exception) -> bool:
        """Whether a 503 means that no stream takes the batch's first or commit subject (its
        stream deleted, a subject mistyped): only an election is worth waiting out, as a
        single publish does."""
        if not isinstance(exc, NoRespondersError):
            return False
        subjects = dict.fromkeys((self._messages[0].subject, self._messages[-1].subject))
        for subject in subjects:
            if not await probe(functools.partial(subject_has_stream, self._js, subject)):
                return True
        return False

    def _check_commit_size(self) -> None:
        """The last message also carries the commit header and the fence's Msg-Id: check it
        again as it will be sent, before anything is.

        Raises:
            ValueTooLargeError: it no longer fits the server's max payload.
        """
        last = self._messages[-1]
        extra = batch_header_size(len(self._messages))
        if self._commit_with != "eob":  # else an empty end-of-batch message carries it
            extra += _COMMIT_HEADER
        size = len(last.data) + (self._seal_overhead if last.unsealed else 0)
        check_message_size(self._js.nc, last.subject, last.headers, size, extra_headers=extra)

    async def _send(self, batch_id: str) -> PubAck:
        """One attempt: the messages under ``batch_id``; return the commit's pub ack.

        The messages that ask for a reply (the first, every ``ack_every``-th, the commit) are
        the stops; those between them go out without replies, in slices, so the server stages
        one slice while the next is sealed and encoded."""
        self._commit_sent = False
        self._sent_ids.add(batch_id)
        count = len(self._messages)
        eob = self._commit_with == "eob"
        start = 0
        for stop in self._stops(count, eob):
            await self._publish_run(batch_id, start, stop)
            message = self._sealed(stop)
            headers = _batch_headers(message.headers, batch_id, stop + 1)
            if stop == count - 1 and not eob:
                headers[hdr.BATCH_COMMIT] = "1"
                return await self._request_commit(message.subject, message.data, headers)
            staged = self._request_zero_ack(message.subject, message.data, headers)
            await self._sealing_while(staged, stop + 1)
            start = stop + 1
        await self._publish_run(batch_id, start, count)
        commit = {
            hdr.BATCH_ID: batch_id,
            hdr.BATCH_SEQUENCE: str(count + 1),
            hdr.BATCH_COMMIT: "eob",
        }
        return await self._request_commit(self._messages[-1].subject, b"", commit)

    def _stops(self, count: int, eob: bool) -> list[int]:
        """The indexes of the messages sent as requests, in order (the commit is the last)."""
        stops = {0}
        if self._ack_every:
            stops.update(range(self._ack_every - 1, count, self._ack_every))
        if not eob:
            stops.add(count - 1)
        return sorted(stops)

    def _sealed(self, index: int) -> _Message:
        """Message ``index`` with its payload sealed (kept: a resend sends the same bytes)."""
        message = self._messages[index]
        if message.unsealed:
            assert self._seal is not None  # _append refuses unsealed messages without it
            data = self._seal(message.subject, message.data)
            message = msgspec.structs.replace(message, data=data, unsealed=False)
            self._messages[index] = message
            self._unsealed -= 1
        return message

    async def _sealing_while(self, request: Coroutine[Any, Any, None], start: int) -> None:
        """Await ``request`` while sealing the messages from ``start`` on, a slice between
        looks at the socket: the reply's wait is spent on work the batch needs anyway."""
        if not self._unsealed:
            await request
            return
        task = asyncio.ensure_future(request)
        try:
            await asyncio.sleep(0)  # the request leaves first, then the sealing starts
            end = len(self._messages)
            while not task.done() and start < end:
                for index in range(start, min(start + _SLICE, end)):
                    self._sealed(index)
                start += _SLICE
                await asyncio.sleep(0)  # the reply (and the request's own flush) may be due
            await task
        finally:
            if not task.done():  # cancelled while sealing: the request goes with us,
                task.cancel()
                await asyncio.wait([task])  # and has ended when the caller hears of it
            if not task.cancelled():
                task.exception()  # retrieved, so never logged as lost

    async def _publish_run(self, batch_id: str, start: int, stop: int) -> None:
        """Messages ``start`` .. ``stop - 1``, no replies, written a slice at a time so the
        server stages one while the next is sealed and encoded."""
        id_lines = _batch_id_lines(batch_id)
        for first in range(start, stop, _SLICE):
            last = min(first + _SLICE, stop)
            numbered = [(index + 1, self._sealed(index)) for index in range(first, last)]
            await self._publish_slice(batch_id, id_lines, numbered)
            if last < stop:
                await asyncio.sleep(0)  # let the client's flusher write this slice now

    async def _publish_slice(
        self, batch_id: str, id_lines: bytes, numbered: list[tuple[int, _Message]]
    ) -> None:
        """HPUB frames from each message's encoded lines and the batch's own (the same header
        lines as ``_batch_headers`` gives); ``numbered`` pairs batch sequences and messages."""
        frames = (_batch_frame(m.subject, m.lines, m.data, id_lines, seq) for seq, m in numbered)

        def messages() -> list[tuple[str, dict[str, str], bytes]]:
            return [
                (m.subject, _batch_headers(m.headers, batch_id, seq), m.data) for seq, m in numbered
            ]

        await publish_encoded(self._js.nc, frames, messages, numbered[0][1].subject)

    async def _request_zero_ack(self, subject: str, data: bytes, headers: dict[str, str]) -> None:
        reply = await self._js.send(subject, data, timeout=self._timeout, headers=headers)
        if reply.data:  # a zero-byte reply means "staged"; anything else is an error ack
            decode_reply(reply.data, PubAck, subject=subject)
            raise BatchProtocolError(f"unexpected reply to a batch message: {reply.data[:200]!r}")

    async def _request_commit(self, subject: str, data: bytes, headers: dict[str, str]) -> PubAck:
        self._commit_sent = True
        reply = await self._js.send(subject, data, timeout=self._timeout, headers=headers)
        return decode_reply(reply.data, PubAck, subject=subject)

    def _checked(self, ack: PubAck, batch_id: str, *, resolved: bool) -> BatchAck:
        count = len(self._messages)
        if ack.batch != batch_id or ack.count != count:
            raise BatchProtocolError(
                f"commit ack for batch {ack.batch!r} counts {ack.count} messages; "
                f"expected {batch_id!r} with {count}"
            )
        self._stream = ack.stream
        return BatchAck(
            stream=ack.stream,
            batch_id=batch_id,
            first_seq=ack.seq - count + 1,
            last_seq=ack.seq,
            count=count,
            resolved=resolved,
        )

    # -- resolution ---------------------------------------------------------------------------

    def _unknown(self, why: str) -> CommitUnknownError:
        return CommitUnknownError(
            f"batch {self._id}: commit outcome unknown ({why})",
            batch_id=self._id,
            msg_ids=[m.msg_id for m in self._messages if m.msg_id],
        )

    async def _committed_earlier(self, deadline: float) -> BatchAck | None:
        """The server refused a resend as a duplicate: an earlier attempt committed (or, with
        the caller's own Msg-Id on the last message, that id was used by another write).
        Where it is stored; None when our own id was refused yet no such batch is stored
        (purged since, or a server not caught up yet).

        Raises:
            DuplicateMessageIdError: the caller's own Msg-Id was used by another write.
        """
        found = await self._find_stored(deadline)
        if found is None and not self._own_fence:
            raise DuplicateMessageIdError("the last message's Nats-Msg-Id was used before")
        return found

    async def _find_stored(self, deadline: float) -> BatchAck | None:
        """Look the batch up by message id, retrying while the server is unreachable."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                return await self._lookup()
            except PermissionDeniedError as exc:  # e.g. a kvstore prefix writer
                raise self._unknown(f"may not read the stream to learn it: {exc}") from exc
            except _RETRYABLE as exc:
                if loop.time() >= deadline:
                    raise self._unknown(f"lookup failed: {exc}") from exc
                await asyncio.sleep(0.2)

    async def _lookup(self) -> BatchAck | None:
        """Where the batch is stored, found through its last message's id; None if absent.

        A committed batch is stored contiguously (the server commits it under one lock), which
        the first message's id confirms.
        """
        stream = self._stream or await self._stream_for(self._messages[0].subject)
        last = self._messages[-1]
        stored = await find_by_msg_id(self._js, stream, last.subject, last.msg_id)
        if stored is None or stored.headers.get(hdr.BATCH_ID) not in self._sent_ids:
            return None  # absent, or another write's message with the caller's Msg-Id
        count = len(self._messages)
        first_seq = stored.seq - count + 1
        batch_id = stored.headers.get(hdr.BATCH_ID, self._id)
        head = await self._get(stream, first_seq)
        if head is not None and (
            head.headers.get(hdr.BATCH_ID) != batch_id
            or head.headers.get(hdr.BATCH_SEQUENCE) != "1"
        ):
            raise JetStreamError(f"batch {batch_id}: stored messages are not contiguous")
        return BatchAck(stream, batch_id, first_seq, stored.seq, count, resolved=True)

    async def _get(self, stream: str, seq: int) -> StoredMessage | None:
        try:
            return await get_message(self._js, stream, seq, direct=False)  # the leader knows
        except MessageNotFoundError:
            return None

    async def _stream_for(self, subject: str) -> str:
        stream = await stream_for_subject(self._js, subject)
        if stream is None:
            raise NoRespondersError(f"no stream listens on {subject}")
        self._stream = stream
        return stream


def _check_options(commit_with: object, seal: object) -> None:
    """Raises ClientValidationError (a ValueError): an option of the wrong type or value (the
    counts are checked by ``check_count``)."""
    if commit_with not in ("last", "eob"):
        raise ClientValidationError(f"commit_with must be 'last' or 'eob': {commit_with!r}")
    if seal is not None and not callable(seal):
        raise ClientValidationError(f"seal must be a callable or None, not {seal!r}")


def _batch_headers(headers: dict[str, str], batch_id: str, seq: int) -> dict[str, str]:
    return {**headers, hdr.BATCH_ID: batch_id, hdr.BATCH_SEQUENCE: str(seq)}


def _batch_id_lines(batch_id: str) -> bytes:
    """The batch id line and the start of the sequence line, the same for every message."""
    return b"%s: %s\r\n%s: " % (
        hdr.BATCH_ID.encode(),
        batch_id.encode(),
        hdr.BATCH_SEQUENCE.encode(),
    )


def _batch_frame(subject: str, lines: bytes, data: bytes, id_lines: bytes, seq: int) -> bytes:
    """The HPUB frame of message ``seq``: what ``encode_hpub`` gives for ``_batch_headers``."""
    return hpub_frame(subject, b"%s%s%d\r\n" % (lines, id_lines, seq), data)


_ID_LENGTH = 22  # a NUID, for every attempt
_SLICE = 64
"""Messages sealed or written at a time between looks at the event loop (about 0.1 ms of
sealing): small enough that a reply waits little, large enough that the looks cost little."""
_COMMIT_HEADER = header_lines_size({hdr.BATCH_COMMIT: "1"})


_BATCH_LINES = header_lines_size({hdr.BATCH_ID: "x" * _ID_LENGTH, hdr.BATCH_SEQUENCE: ""})


def batch_header_size(seq: int) -> int:
    """Bytes of the batch header lines message ``seq`` of a batch carries (id, sequence)."""
    return _BATCH_LINES + len(str(seq))


def _new_batch_id() -> str:
    return NUID().next().decode()
