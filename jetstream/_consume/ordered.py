"""OrderedConsumer (ADR-37): an ephemeral consumer recreated in place from the next stream
sequence when a delivery is missed, the consumer lost or the stream replaced; never a storm."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime
from typing import Any, Final, Self

import nats.errors
from nats.nuid import NUID

from .._api.client import ApiClient
from .._api.consumers import consumer_info, create_consumer_info, delete_consumer
from .._api.streams import stream_info
from .._errors import (
    ClientValidationError,
    ConnectionClosedError,
    ConsumerNotFoundError,
    ConsumerStuckError,
    JetStreamError,
    NoRespondersError,
    PermissionDeniedError,
    RequestTimeoutError,
    StreamNotFoundError,
)
from .._protocol.duration import DurationValue, optional_duration
from .._protocol.message import AckReply
from .._protocol.models import ConsumerConfig, ConsumerInfo, StreamInfo
from .._resource import AsyncResource
from .message_stream import ErrorCallback
from .pull import Puller
from .pull_message import PullMessage, no_delivery, report_skipped
from .pull_options import sized_options
from .queue import WAKE, Item, ResetSignal
from .resets import ResetGuard, reset_backoff

__all__ = ["OrderedConsumer"]

_log = logging.getLogger("jetstream")
_ORDERED_POLICIES = frozenset({"all", "last", "new", "last_per_subject"})
_IDLE_SCAN_CHECK = 1.0  # seconds without a message before a scan asks whether it is complete
WINDOW_MESSAGES = 10_000
"""Messages an ordered consumer requests and buffers at most (``benchmarks.watch_window``
compares sizes: 500, nats.go's consume default, cost a watch 20-40% of its wall time here)."""
WINDOW_BYTES: Final = 8 << 20
"""About what it buffers of large messages (the message limit fitted to their sizes)."""


def range_window(first: int, last: int) -> int:
    """The window of a read of stream sequences ``first..last`` that stops at the first
    message past ``last``: no more than it can use (the server sends a whole pull's worth,
    and what comes past the range is dropped)."""
    return max(1, min(WINDOW_MESSAGES, last - first + 2))


def _log_warning(error: JetStreamError) -> None:
    _log.warning("ordered consumer: %s", error)


def stream_replaced(
    info: StreamInfo,
    delivered: int,
    *,
    created: datetime | None = None,
    read_since: datetime | None = None,
) -> bool:
    """Whether ``info`` is of another stream than the one a consumer read up to sequence
    ``delivered``: a stream's last sequence never goes below a sequence it delivered, its
    creation time (``created``, when known) never changes, and it was created before the
    reader's first server-side consumer was (``read_since``, by the server's clock)."""
    if info.state.last_seq < delivered:
        return True
    if info.created is None:
        return False  # a server that does not say: the sequences decide
    if created is not None:
        return info.created != created
    return read_since is not None and info.created > read_since


class OrderedConsumer(AsyncResource):
    """An ephemeral, in-order, gap-free view of a stream (ADR-37 ordered consumer).

    A memory-storage, ack-none consumer is created and, whenever delivery could have skipped
    something (a consumer sequence gap, missed heartbeats, the consumer deleted or missing, a
    reconnect), recreated from the last delivered stream sequence + 1, with backoff, as often as
    needed (``max_resets``, default unlimited). Iterate it with ``async for``; use it as an async
    context manager to clean up.

    It requests and buffers at most ``max_messages`` (default :data:`WINDOW_MESSAGES`), fewer
    when they are large: about ``memory_bytes`` by the sizes of the last messages (0: up to
    ``max_messages`` whatever their size). A watch of small values pulls thousands at a time,
    one of 1 MiB values a few. Past four times ``memory_bytes`` buffered (large messages
    after small ones) it drops what comes and resumes after the last message taken.

    A recreation that keeps failing (a paused or unreachable server) is retried for
    ``reset_deadline`` seconds, then iteration raises :class:`RequestTimeoutError`. By default a
    scan (``until_caught_up``) allows the context's ``retry_deadline``, so a listing ends in
    bounded time, while a consumer that follows new messages (a watch) retries forever.

    A deleted stream ends the iteration with :class:`StreamNotFoundError`, at once, and so
    does one created again under its name before the consumer is recreated (its sequences
    start over: resuming at the old position would skip its first messages). Each
    recreation asks the stream's info first: another stream is one whose last sequence is below
    the last delivered one, or that was created after the first consumer was (both times by the
    server's clock, from the answers it gave); with ``detect_recreation`` (one request more
    before the first consumer, for long-lived watches, where a server's clock may have been set
    back) one whose creation time changed.

    ``until_caught_up`` ends the iteration once every message that existed at the start has been
    delivered (for listings); otherwise it follows new messages forever. With ``ends_scan``, a
    delivered message with nothing pending ends it only if ``ends_scan(message)`` (a scan that
    must stop at the end of an atomic batch); an idle consumer with nothing pending always does.

    Raises (on construction): ClientValidationError for an unknown ``deliver_policy`` (``all``,
    ``last``, ``new``, ``last_per_subject``; use ``opt_start_seq`` to start at a sequence), a
    negative ``opt_start_seq``, a ``reset_deadline`` that is not positive seconds, or
    out-of-range pull options.
    """

    def __init__(
        self,
        js: ApiClient,
        stream: str,
        *,
        filter_subjects: list[str] | None = None,
        deliver_policy: str = "all",
        opt_start_seq: int = 0,
        headers_only: bool = False,
        heartbeat: float = 5.0,
        max_messages: int | None = None,
        memory_bytes: int = WINDOW_BYTES,
        until_caught_up: bool = False,
        ends_scan: Callable[[PullMessage], bool] | None = None,
        max_resets: int | None = None,
        reset_deadline: float | None = None,
        inactive_threshold: DurationValue = 300.0,
        error_callback: ErrorCallback | None = None,
        detect_recreation: bool = False,
    ) -> None:
        if deliver_policy not in _ORDERED_POLICIES:
            raise ClientValidationError(
                f"deliver_policy must be one of {sorted(_ORDERED_POLICIES)}: {deliver_policy!r}"
            )
        if opt_start_seq < 0:
            raise ClientValidationError(f"opt_start_seq must be >= 0: {opt_start_seq}")
        self._js = js
        self.stream = stream
        self._filters = list(filter_subjects or [">"])
        self._policy = deliver_policy
        self._start_seq = opt_start_seq
        self._headers_only = headers_only
        self._options = sized_options(
            # The module's value now, not at import: benchmarks.watch_window sets it.
            max_messages=WINDOW_MESSAGES if max_messages is None else max_messages,
            memory_bytes=memory_bytes,
            largest_message=js.nc.max_payload,
            expires=max(2 * heartbeat, 30.0),
            heartbeat=heartbeat,
        )
        self._until_caught_up = until_caught_up
        self._ends_scan = ends_scan or (lambda message: True)
        self._max_resets = max_resets
        if reset_deadline is not None and (
            isinstance(reset_deadline, bool)
            or not isinstance(reset_deadline, int | float)
            or not reset_deadline > 0
        ):
            raise ClientValidationError(
                f"reset_deadline must be positive seconds: {reset_deadline!r}"
            )
        if reset_deadline is None and until_caught_up:
            reset_deadline = js.retry_deadline
        self._reset_deadline = reset_deadline
        self._inactive = optional_duration(inactive_threshold, name="inactive_threshold")
        self._on_error = error_callback or _log_warning
        self._prefix = NUID().next().decode()
        self._serial = 0
        self._puller: Puller | None = None
        self._name = ""
        self._expected = 1  # next consumer sequence
        self.last_stream_seq = 0
        """Stream sequence of the last delivered message (0 before the first)."""
        self.initial_pending: int | None = None
        """Messages pending when the first consumer was created (the snapshot size)."""
        self.resets = 0
        self.skipped = 0
        """Messages skipped because their subject is not UTF-8 (each reported once to the
        error callback, or as a logged warning)."""
        self.initial_done = asyncio.Event()
        """Set once nothing is pending: a consumer was created with nothing pending, or a
        message was taken (delivered or skipped) with nothing pending after it."""
        self._guard = ResetGuard(window=heartbeat)
        self._reconnects = 0  # the connection's reconnect count when the consumer was created
        self._detect_recreation = detect_recreation
        self._stream_created: datetime | None = None  # known with detect_recreation
        self._read_since: datetime | None = None  # the first consumer's creation, server time
        self._caught_up = False
        self._stuck_at: int | None = None  # delivered count at the last idle check of a scan
        self._closed = False
        self._forgetting: set[asyncio.Task[None]] = set()  # deletes of replaced consumers

    # -- consumer (re)creation ----------------------------------------------------------------

    def _config(self) -> ConsumerConfig:
        self._serial += 1
        resume = self.last_stream_seq > 0
        return ConsumerConfig(
            name=f"{self._prefix}_{self._serial}",
            deliver_policy="by_start_sequence" if resume or self._start_seq else self._policy,  # type: ignore[arg-type]
            opt_start_seq=self.last_stream_seq + 1 if resume else self._start_seq,
            ack_policy="none",
            filter_subjects=self._filters,
            headers_only=self._headers_only,
            mem_storage=True,
            num_replicas=1,
            inactive_threshold=self._inactive,
        )

    async def _create(self) -> None:
        if self._detect_recreation and self.initial_pending is None:  # the first consumer
            await self._note_stream_created()
        config = self._config()
        self._name = config.name  # known before the reply: a cancelled create is deleted too
        info = await self._settled(create_consumer_info(self._js, self.stream, config))
        self._name = info.name
        if self._read_since is None:
            self._read_since = info.created
        self._guard.created(asyncio.get_running_loop().time())
        if self.initial_pending is None:
            self.initial_pending = info.num_pending
        if info.num_pending == 0:
            self.initial_done.set()
            self._caught_up = self._until_caught_up
        self._expected = 1
        self._reconnects = self._js.nc.stats.get("reconnects", 0)
        puller = Puller(
            self._js,
            self.stream,
            self._name,
            self._options,
            on_error=self._on_error,
            signal_resets=True,
            skip_now=self._skip_on_arrival,
        )
        try:
            await puller.start()
        except BaseException:
            await asyncio.shield(puller.stop())  # half started: its subscription goes
            raise
        if self._closed:  # closed while this create was on its way: nothing may pull
            await puller.stop()
            await self._forget(self._name)
            return
        self._puller = puller  # only a running one: iteration waits on it

    async def _settled(self, creating: Awaitable[ConsumerInfo]) -> ConsumerInfo:
        """Await a consumer create; if the caller is cancelled meanwhile, still wait (up to
        the timeout) for the server's answer, so that the delete that follows cannot overtake
        the create (the server runs API requests in parallel) and leave the consumer behind."""
        request = asyncio.ensure_future(creating)
        try:
            return await asyncio.shield(request)
        except asyncio.CancelledError:
            await asyncio.wait([request], timeout=self._js.timeout)
            request.cancel()
            if not request.cancelled() and request.done():
                request.exception()  # retrieved: the cancel is what the caller gets
            raise

    async def _reset(self, why: str, *, delivery: bool = False) -> None:
        """Recreate the consumer after the last delivered message, retrying with backoff
        (``delivery``: the reset was caused by what the server delivered, see ResetGuard).

        Raises:
            ConsumerStuckError: resets caused by deliveries kept failing at the same sequence.
        """
        loop = asyncio.get_running_loop()
        delay = self._guard.reset(self.last_stream_seq, loop.time(), delivery=delivery)
        if delay is None:
            await self.close()
            raise ConsumerStuckError(
                f"ordered consumer on {self.stream}: recreated {self._guard.in_place} times "
                f"at stream sequence {self.last_stream_seq} without getting past it ({why})",
                stream=self.stream,
                seq=self.last_stream_seq,
            )
        old, old_name = self._puller, self._name
        # None until a new consumer runs: a reset cancelled midway (a caller's timeout around
        # a read while the server is away) is finished by the next read, never left waiting
        # on the stopped puller.
        self._puller = None
        if old is not None:
            self._in_background(old.stop())  # all of it, even if this reset is cancelled
        if old_name:
            self._in_background(self._forget(old_name))
        if delay:
            await asyncio.sleep(delay)
        attempt = 0
        started = loop.time()
        while True:
            if self._closed:
                return  # closed while this reset waited: no new consumer (reads end)
            if self._max_resets is not None and self.resets >= self._max_resets:
                raise JetStreamError(f"ordered consumer gave up after {self.resets} resets ({why})")
            self.resets += 1
            try:
                await self._check_same_stream()
                await self._create()
                return
            except (StreamNotFoundError, ConnectionClosedError):
                raise  # retrying cannot help
            except (JetStreamError, nats.errors.Error, OSError) as exc:
                # The server may still apply a create it did not answer in time.
                self._in_background(self._forget(self._name))
                if self._on_error is not None:
                    self._on_error(JetStreamError(f"ordered consumer reset ({why}) failed: {exc}"))
                waited = loop.time() - started
                if self._reset_deadline is not None and waited >= self._reset_deadline:
                    raise RequestTimeoutError(
                        f"ordered consumer on {self.stream}: not recreated in {waited:.0f}s "
                        f"({why}; reset_deadline {self._reset_deadline:g}s): {exc}"
                    ) from None
            attempt += 1
            await asyncio.sleep(reset_backoff(attempt))

    async def _note_stream_created(self) -> None:
        """Remember the stream's creation time, which tells it from one created again."""
        try:
            self._stream_created = (await stream_info(self._js, self.stream)).created
        except PermissionDeniedError:
            self._stream_created = None  # may not look: the sequence check is left

    async def _check_same_stream(self) -> None:
        """Before a consumer is recreated: the stream must be the one read so far.

        Raises:
            StreamNotFoundError: the stream is gone, or was deleted and created again.
        """
        if not self.last_stream_seq and self._read_since is None and self._stream_created is None:
            return  # nothing read, nothing known: the stream there now is the one to read
        try:
            info = await stream_info(self._js, self.stream)
        except PermissionDeniedError:
            return  # may not look: the consumer create decides, as it did
        replaced = stream_replaced(
            info, self.last_stream_seq, created=self._stream_created, read_since=self._read_since
        )
        if replaced:
            raise StreamNotFoundError(
                f"stream {self.stream} was deleted and created again while it was read",
                code=404,
                err_code=10059,
            )

    async def _forget(self, name: str) -> None:
        with contextlib.suppress(JetStreamError, nats.errors.Error, OSError):
            await delete_consumer(self._js, self.stream, name)

    def _in_background(self, cleanup: Coroutine[Any, Any, None]) -> None:
        """Run ``cleanup`` (stopping a replaced puller, deleting a replaced consumer) to its
        end whatever happens to the caller; close() waits for it."""
        task = asyncio.get_running_loop().create_task(cleanup)
        self._forgetting.add(task)
        task.add_done_callback(self._forgetting.discard)

    # -- iteration ----------------------------------------------------------------------------

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> PullMessage:
        message = await self.next_message()
        assert message is not None
        return message

    async def next_message(self, *, until_initial_done: bool = False) -> PullMessage | None:
        """The next message, as ``async for`` gets it; with ``until_initial_done``, None once
        :attr:`initial_done` is set, also while waiting (messages skipped as they arrive can
        set it: then no message may come for a long time).

        Raises:
            StopAsyncIteration: the consumer was closed, or the scan is complete.
            JetStreamError: as iteration does (a terminal error, ConsumerStuckError, ...).
        """
        if self._closed:
            raise StopAsyncIteration
        if self._puller is None:
            await self.start()  # the first consumer, or one whose creation was cancelled
        while True:
            if self._closed:
                raise StopAsyncIteration
            if self._caught_up:
                await self.close()
                raise StopAsyncIteration
            if until_initial_done and self.initial_done.is_set():
                return None
            assert self._puller is not None
            item: Item | None = await self._next_item(self._puller)
            if item is None or item is WAKE:
                continue  # idle (a scan checked whether it is complete), or initial_done set
            if isinstance(item, PullMessage):
                self._puller.took(item)
                try:
                    meta = item.metadata
                except ValueError:  # published into our inbox by someone: no delivery
                    self._on_error(no_delivery(item, self.stream))
                    continue
                if meta.consumer_seq != self._expected:
                    gap = f"gap: got {meta.consumer_seq}, expected {self._expected}"
                    await self._reset(gap, delivery=self._connection_held())
                    continue
                self._deliver(item, meta)
                if item.undecodable:
                    self._skip(item)
                    continue
                if self._puller.undecodable_seen:
                    self._skip_ahead(self._puller)
                return item
            if isinstance(item, ResetSignal):
                await self._reset(item.reason.value)
                continue
            if isinstance(item, BaseException):
                await self.close()
                raise item
            raise StopAsyncIteration  # stopped

    def next_nowait(self) -> PullMessage | None:
        """The next message if one is already here and in order, else None (then
        ``__anext__`` does whatever comes next: waits, recreates the consumer, ends).

        The per-message path of a watch: a caller that drains what one read of the socket
        brought takes it without the awaits of ``__anext__``.
        """
        puller = self._puller
        if puller is None or self._caught_up or self._closed:
            return None
        message = puller.queue.peek_message()
        if message is None:
            return None
        try:
            meta = message.metadata
        except ValueError:
            return None  # not a delivery: __anext__ takes it out and reports it, once
        if meta.consumer_seq != self._expected or message.undecodable:
            return None  # a gap or a message to skip: __anext__ takes it
        puller.queue.drop_oldest()
        puller.took(message)
        self._deliver(message, meta)
        if puller.undecodable_seen:
            self._skip_ahead(puller)
        return message

    def _connection_held(self) -> bool:
        """Whether the connection stayed up since the consumer was created: a gap then comes
        from what the server delivered, not from messages lost with a connection."""
        nc = self._js.nc
        return nc.is_connected and nc.stats.get("reconnects", 0) == self._reconnects

    def _skip_on_arrival(self, puller: Puller, message: PullMessage) -> bool:
        """Skip an undecodable message that arrives next in line (nothing queued before it),
        so that a snapshot or scan it ends is done now (see Puller's ``skip_now``)."""
        if puller is not self._puller or not self._skipped_if_next(message):
            return False  # a replaced consumer's late delivery, or not next: queued
        if self.initial_done.is_set():
            puller.queue.put_nowait(WAKE)  # a read waiting for the snapshot's end goes on
        return True

    def _skip_ahead(self, puller: Puller) -> None:
        """Skip the undecodable messages queued right after the one being returned, so that
        what they end (a snapshot: :attr:`initial_done`; a scan) ends with it, not at the next
        read, which would wait for a message that may never come."""
        while (head := puller.queue.peek_message()) is not None and head.undecodable:
            if not self._skipped_if_next(head):
                return  # a gap: the next read recreates the consumer
            puller.queue.drop_oldest()
            puller.took(head)

    def _skipped_if_next(self, message: PullMessage) -> bool:
        """Take an undecodable ``message`` as delivered and report it, if it is the next in
        the consumer's sequence (True)."""
        try:
            meta = message.metadata
        except ValueError:
            return False
        if meta.consumer_seq != self._expected:
            return False
        self._deliver(message, meta)
        self._skip(message)
        return True

    def _skip(self, message: PullMessage) -> None:
        """Skip an undecodable message (already counted as delivered): report it once."""
        self.skipped += 1
        report_skipped(self._js, message, self.stream, self._on_error)

    def _deliver(self, message: PullMessage, meta: AckReply) -> PullMessage:
        """Note ``message`` (in order; ``meta`` is its metadata) as delivered and return it."""
        self._expected += 1
        self.last_stream_seq = meta.stream_seq
        if meta.pending == 0:
            self.initial_done.set()
            if self._until_caught_up and self._ends_scan(message):
                self._caught_up = True
        return message

    async def _next_item(self, puller: Puller) -> Item | None:
        """The next item; for ``until_caught_up``, None after an idle second in which the
        server's consumer turned out to have nothing left (then ``_caught_up`` is set).

        A delivered message's ``pending`` is how a scan knows it is complete, but it can stay
        above 0 for good: messages it counted can be removed before delivery (a rollup, as an
        object rename's tombstone does), and the scan then waited forever. The consumer's own
        counts are asked instead once nothing arrives, and a consumer that keeps sitting on
        pending messages is recreated."""
        if not self._until_caught_up:
            return await puller.queue.get()
        try:
            return await puller.queue.get(timeout=_IDLE_SCAN_CHECK)
        except TimeoutError:
            pass
        try:
            info = await consumer_info(self._js, self.stream, self._name)
        except (RequestTimeoutError, NoRespondersError, ConsumerNotFoundError):
            return None  # the heartbeat checks handle a consumer that is gone
        delivered = info.delivered.consumer_seq
        if info.num_pending == 0 and delivered == self._expected - 1:
            self._caught_up = True
        elif delivered == self._stuck_at:
            # Two idle checks, messages pending, nothing delivered in between: the server sits
            # on them (seen when a rollup removed messages this consumer had counted), until
            # missed heartbeats would recreate it seconds later. Recreate it now.
            self._stuck_at = None
            await self._reset("pending messages not delivered", delivery=True)
        else:
            self._stuck_at = delivered
        return None

    async def start(self) -> None:
        """Create the first consumer now (iteration does it otherwise); afterwards
        :attr:`initial_pending` is known. A start or a read cancelled while the consumer was
        being created is finished by the next start or read.

        Raises:
            StreamNotFoundError: no such stream.
        """
        if self._puller is not None or self._closed:  # closed: never a new consumer
            return
        if self._name:  # a create was cancelled midway: finish it (the name is forgotten)
            await self._reset("resumed after a cancelled create")
            return
        try:
            await self._create()
        except (RequestTimeoutError, NoRespondersError, ConsumerNotFoundError):
            await self._reset("initial create failed")

    async def close(self) -> None:
        """Stop pulling and delete the consumer (best effort). A cancel of the caller
        meanwhile (a task cancelled just as a scan ended, which closes it) still deletes the
        consumer first, within the request timeout, then propagates."""
        if self._closed:
            return
        self._closed = True
        closing = asyncio.ensure_future(self._shut_down())
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            await asyncio.wait([closing], timeout=self._js.timeout)
            raise
        for task in list(self._forgetting):
            await asyncio.shield(task)  # never raises; a cancelled close() leaves it running

    async def _shut_down(self) -> None:
        if self._puller is not None:
            await self._puller.stop()
        if self._name:
            await self._forget(self._name)

    async def _enter(self) -> None:
        try:
            await self.start()
        except asyncio.CancelledError:
            # ``async with`` never exits a block whose entry was cancelled: clean up here, or
            # the consumer stays on the server for its inactive threshold.
            await self.close()
            raise

    async def _exit(self, error: BaseException | None) -> None:
        await self.close()
