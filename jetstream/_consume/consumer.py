"""Pull consumers (ADR-37): ``Consumer`` with consume / fetch / next, and ``OrderedConsumer``.

::

    config = ConsumerConfig(durable_name="c", ack_policy="explicit")
    consumer = await js.create_consumer("ORDERS", config)
    async with consumer.consume(max_messages=500) as messages:   # or consume(callback)
        async for msg in messages:
            await msg.ack()

    async for msg in consumer.fetch(max_messages=10, expires=5): ...
    msg = await consumer.next(timeout=5)

Defaults (nats.go's): 500 messages buffered, 30 s pulls, heartbeats every 15 s (warned about
after 30 s of silence, never fatal), re-pull at half the buffer.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from datetime import datetime
from types import TracebackType
from typing import Any, Self

import msgspec
import nats.errors
from nats.nuid import NUID

from .. import headers as hdr
from .._api.client import ApiClient
from .._api.consumers import consumer_info, create_consumer_info, delete_consumer
from .._api.streams import stream_info
from .._errors import (
    ClientValidationError,
    ConnectionClosedError,
    ConsumerNotFoundError,
    ConsumerStuckError,
    HeartbeatMissedError,
    JetStreamError,
    NoRespondersError,
    PermissionDeniedError,
    PullRequestError,
    RequestTimeoutError,
    StreamNotFoundError,
)
from .._protocol import status as st
from .._protocol.duration import DurationValue, optional_duration, seconds_of
from .._protocol.message import AckReply
from .._protocol.models import ConsumerConfig, ConsumerInfo, StreamInfo
from .._resource import AsyncResource, aclose_iterator
from .._transport.events import ConnectionEvent
from .._transport.nats_errors import nats_errors
from .priority import PriorityPin
from .pull import (
    DEFAULT_EXPIRES,
    WAKE,
    DeliveryInbox,
    Item,
    ItemQueue,
    Puller,
    PullMessage,
    ResetSignal,
    cancel_and_wait,
    is_delivery,
    no_delivery,
    pull_options,
    report_skipped,
    terminate,
)
from .pull_options import FetchOptions, fetch_options
from .resets import ResetGuard, reset_backoff

__all__ = ["Consumer", "MessageStream", "OrderedConsumer"]

ErrorCallback = Callable[[JetStreamError], None]
_log = logging.getLogger("jetstream")
_ORDERED_POLICIES = frozenset({"all", "last", "new", "last_per_subject"})
_IDLE_SCAN_CHECK = 1.0  # seconds without a message before a scan asks whether it is complete
_CLOSED_CHECK = 0.1  # seconds between looks at a connection whose closing is not told
_SERVER_ACK_WAIT = 30.0  # the default of the server, for a consumer created without one
MessageCallback = Callable[[PullMessage], Awaitable[None] | None]


class MessageStream(AsyncResource):
    """Messages of a running :meth:`Consumer.consume`: an async iterator and context manager.

    ``stop()`` ends it at once; ``drain()`` stops pulling and ends after the messages the server
    already sent (one round trip). A terminal condition (consumer deleted, a 400 or push-based
    refusal, the connection closed) is raised from the iterator (or, with a callback, passed to
    the error callback) and ends it; warnings (missed heartbeats, a consumer limit the pulls
    were adjusted to, a message larger than ``max_bytes``) go to the error callback only.
    """

    def __init__(
        self, puller: Puller, callback: MessageCallback | None, on_error: ErrorCallback | None
    ) -> None:
        self._puller = puller
        self._callback = callback
        self._on_error = on_error
        self._worker: asyncio.Task[None] | None = None
        self._done = asyncio.Event()
        self.error: BaseException | None = None
        """The terminal error that ended the stream, if any."""
        self.skipped = 0
        """Messages skipped because their subject is not UTF-8: each was reported once (an
        :class:`UndecodableMessageError` to the error callback, or a logged warning) and
        terminated (``+TERM``), so that it is not delivered again."""

    async def _start(self) -> Self:
        await self._puller.start()
        if self._callback is not None:
            self._worker = asyncio.create_task(self._dispatch())
        return self

    async def _dispatch(self) -> None:
        try:
            async for message in self:
                try:
                    result = self._callback(message)  # type: ignore[misc]
                    if inspect.isawaitable(result):
                        await result
                except Exception as exc:  # the handler's problem: report, keep consuming
                    if self._on_error is not None:
                        self._on_error(JetStreamError(f"message handler failed: {exc!r}"))
        except JetStreamError as exc:
            if self._on_error is not None:
                self._on_error(exc)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> PullMessage:
        while not self._done.is_set():
            item = await self._puller.queue.get()
            if not isinstance(item, PullMessage):
                await self._finish()
                if isinstance(item, BaseException):
                    self.error = item
                    raise item
                break
            self._puller.took(item)
            if not item.undecodable and is_delivery(item):
                return item
            if item.undecodable:
                self.skipped += 1
            await self._puller.skip(item)
        raise StopAsyncIteration

    async def _finish(self) -> None:
        self._done.set()
        await self._puller.stop()

    async def stop(self) -> None:
        """Stop now: no more pulls; buffered messages are dropped."""
        await self._finish()
        if self._worker is not None and self._worker is not asyncio.current_task():
            await cancel_and_wait(self._worker)

    async def drain(self) -> None:
        """Stop pulling; the stream ends after the messages the server already sent (one round
        trip, not the pulls' expiry). With a callback, waits until it handled them; otherwise
        iterate to the end."""
        await self._puller.drain()
        if self._worker is not None:
            await self._worker
        await self.closed()

    async def closed(self) -> None:
        """Wait until the stream has ended."""
        await self._done.wait()

    async def _exit(self, error: BaseException | None) -> None:
        await self.stop()


def _ack_deadline(config: ConsumerConfig | None) -> float | None:
    """Seconds after which the consumer's server gives a delivered message out again: the
    shortest of ``ack_wait`` (the server's default 30 s) and ``backoff`` (None: no acks)."""
    if config is None or config.ack_policy == "none":
        return None
    waits = [_SERVER_ACK_WAIT if config.ack_wait is None else config.ack_wait.total_seconds()]
    waits += [step.total_seconds() for step in config.backoff or ()]
    return min(waits)


class _StartingStream:
    """What ``consume()`` returns: await it, or use it with ``async with`` directly."""

    def __init__(self, stream: MessageStream) -> None:
        self._stream = stream

    def __await__(self) -> Any:
        return self._stream._start().__await__()

    async def __aenter__(self) -> MessageStream:
        return await self._stream._start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stream.stop()


class Consumer:
    """A pull consumer on a stream. Get one from ``js.create_consumer`` / ``js.consumer``."""

    def __init__(self, js: ApiClient, stream: str, info: ConsumerInfo) -> None:
        self._js = js
        self.stream = stream
        self.name = info.name
        self.cached_info = info
        """The info from when this object was made; :meth:`info` fetches a fresh one."""
        self._pins: dict[str, PriorityPin] = {}

    def pin_id(self, group: str) -> str:
        """The pin id this object's pulls of priority group ``group`` carry ("" when not
        pinned): the ``Nats-Pin-Id`` of the last message they got."""
        pin = self._pins.get(group)
        return "" if pin is None else pin.id

    def _pin(self, group: str | None) -> PriorityPin | None:
        """The pin state shared by this object's consume / fetch / next of ``group``."""
        if group is None:
            return None
        pin = self._pins.get(group)
        if pin is None:
            pin = self._pins[group] = PriorityPin(group)
        return pin

    def _expires(self, expires: DurationValue | None, group: str | None) -> DurationValue:
        """A pull's lifetime: the given one; for a pinned group at most half its
        ``priority_timeout`` (a pinned client keeps its pin only by pulling again within it),
        at least 1 s; else ADR-37's 30 s."""
        if expires is not None:
            return expires
        config = self.cached_info.config
        timeout = None if config is None else config.priority_timeout
        if group is None or timeout is None:
            return DEFAULT_EXPIRES
        return max(1.0, min(DEFAULT_EXPIRES, timeout.total_seconds() / 2))

    def __repr__(self) -> str:
        return f"<Consumer {self.stream}/{self.name}>"

    async def info(self) -> ConsumerInfo:
        """Fresh consumer info.

        Raises:
            ConsumerNotFoundError: the consumer is gone.
        """
        self.cached_info = await consumer_info(self._js, self.stream, self.name)
        return self.cached_info

    def consume(
        self,
        callback: MessageCallback | None = None,
        *,
        max_messages: int | None = None,
        max_bytes: int | None = None,
        expires: DurationValue | None = None,
        heartbeat: DurationValue | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
        error_callback: ErrorCallback | None = None,
        group: str | None = None,
        keep_buffered: bool = False,
    ) -> _StartingStream:
        """Receive messages continuously; ``await`` it or use ``async with`` to get a
        :class:`MessageStream`. With ``callback`` each message is passed to it (sync or async)
        and the stream is only a handle (``stop``, ``drain``, ``closed``).

        Options as in ADR-37: ``max_messages`` (default 500) or ``max_bytes`` bounds what is
        requested and buffered, ``expires`` (>= 1 s) is each pull's lifetime, ``heartbeat``
        (0.5..30 s) defaults to ``expires / 2``, ``threshold_messages`` / ``threshold_bytes``
        (0..the limit in use, default half) is what is left outstanding when the next pull
        goes out; ``error_callback`` receives warnings such as :class:`HeartbeatMissedError`,
        :class:`MessageTooLargeForPullError` and a :class:`PullRequestError` for a consumer
        limit (``max_batch``, ``max_expires``, ``max_bytes``) the pulls were adjusted to.
        A consumer deleted meanwhile ends the stream with :class:`ConsumerDeletedError`.

        ``group`` names the ADR-42 priority group to pull in (required by consumers with
        ``priority_groups``). For a ``pinned_client`` group the pulls carry the pin id of the
        last message (``Nats-Pin-Id``); a ``423`` (another client is pinned now) is not an
        error: the pin is dropped and the pulls wait, without it, until the group pins this
        client again. ``expires`` then defaults to half the consumer's ``priority_timeout``
        (1..30 s), since the pin is kept only by pulling again within that timeout; while the
        buffer is full, a pull that can take nothing keeps it.

        ``keep_buffered``: messages waiting in the buffer do not time out. The consumer's
        ``ack_wait`` runs from the moment the server sends a message; one that waits behind a
        slow callback would otherwise be delivered again (and then also run twice). A waiting
        message gets an in-progress (``+WPI``) before half of ``ack_wait`` has passed, and one
        handed out after waiting more than 5% of it gets one first, so the callback has at
        least 95% of ``ack_wait`` from its start. Messages taken at once cost nothing. Off
        by default: kept messages stay with this consume, however long its callback takes,
        instead of going to another client of the consumer.

        Raises:
            ClientValidationError: conflicting or out-of-range options, or a bad ``group``
                name (at once, nothing sent).
        """
        pin = self._pin(group)
        options = pull_options(
            max_messages=max_messages,
            max_bytes=max_bytes,
            expires=self._expires(expires, group),
            heartbeat=heartbeat,
            threshold_messages=threshold_messages,
            threshold_bytes=threshold_bytes,
        )
        puller = Puller(
            self._js,
            self.stream,
            self.name,
            options,
            on_error=error_callback,
            pin=pin,
            ack_wait=_ack_deadline(self.cached_info.config) if keep_buffered else None,
        )
        return _StartingStream(MessageStream(puller, callback, error_callback))

    async def fetch(
        self,
        max_messages: int | None = None,
        *,
        max_bytes: int | None = None,
        expires: DurationValue = DEFAULT_EXPIRES,
        heartbeat: DurationValue | None = None,
        group: str | None = None,
    ) -> AsyncIterator[PullMessage]:
        """One pull: yield up to ``max_messages`` (default 1) or ``max_bytes`` worth of
        messages, ending when the pull is complete, expires, or no more messages will come.
        ``heartbeat`` asks the server for idle heartbeats (0.5..30 s, at most ``expires / 2``;
        on by default, 5 s, for ``expires`` above 30 s): two missed end the fetch.
        ``group``: the priority group to pull in, as in :meth:`consume`; a ``423`` (another
        client is pinned) ends the fetch without an error and forgets the pin.

        Raises:
            ClientValidationError: both limits, a limit below 1, ``expires`` not positive, a
                heartbeat out of range or a bad ``group`` (nothing is sent).
            ConsumerDeletedError, PullRequestError: the server refused or ended the pull.
            NoRespondersError: no such consumer.
            HeartbeatMissedError: the pull went silent for two heartbeats.
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
        """
        options = fetch_options(
            max_messages=max_messages, max_bytes=max_bytes, expires=expires, heartbeat=heartbeat
        )
        pin = self._pin(group)
        what = f"fetch from {self.stream}/{self.name}"
        self._js.ensure_open()
        queue = ItemQueue()
        inbox = DeliveryInbox(self._js, queue.put_nowait, sized=True)
        closed = _closed_into(queue, self._js)
        self._js.connection_events.add(closed)
        try:
            subject = await inbox.open(what)
            with nats_errors(what):
                await self._js.nc.publish(
                    self._js.api.consumer_next(self.stream, self.name),
                    _fetch_request(options, pin),
                    reply=subject,
                )
            async for message in _fetched(queue, options, self._js, what, pin):
                if not message.undecodable and is_delivery(message):
                    yield message
                elif message.undecodable:
                    report_skipped(self._js, message, self.stream, None)
                    await terminate(message)
                else:
                    _log.warning("%s", no_delivery(message, self.stream))
        finally:
            self._js.connection_events.remove(closed)
            await inbox.close()

    async def next(
        self,
        timeout: DurationValue = 5.0,
        *,
        heartbeat: DurationValue | None = None,
        group: str | None = None,
    ) -> PullMessage:
        """The next message; ``heartbeat`` and ``group`` as in :meth:`fetch`.

        Raises:
            RequestTimeoutError: none arrived within ``timeout`` seconds.
            ClientValidationError: ``timeout`` not positive, or a heartbeat out of range.
            ConsumerDeletedError, PullRequestError, NoRespondersError, HeartbeatMissedError,
                ConnectionClosedError: as :meth:`fetch`.
        """
        seconds = seconds_of(timeout, name="timeout")
        if seconds <= 0:
            raise ClientValidationError(f"timeout must be positive: {seconds:g}s")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while (left := deadline - loop.time()) > 0:  # again after a pull that was all skipped
            pull = self.fetch(1, expires=max(left, 1.0), heartbeat=heartbeat, group=group)
            try:
                async for message in pull:
                    return message
            finally:
                await aclose_iterator(pull)  # its inbox goes now, not when collected
        raise RequestTimeoutError(f"no message from {self.stream}/{self.name} within {seconds:g}s")


def _fetch_request(options: FetchOptions, pin: PriorityPin | None) -> bytes:
    request: dict[str, int | str] = {
        "batch": options.batch,
        "expires": int(options.expires * 1e9),
    }
    if options.max_bytes:
        request["max_bytes"] = options.max_bytes
    if options.heartbeat:
        request["idle_heartbeat"] = int(options.heartbeat * 1e9)
    if pin is not None:
        request.update(pin.fields())
    return msgspec.json.encode(request)


def _closed_into(queue: ItemQueue, js: ApiClient) -> Callable[[ConnectionEvent], None]:
    """A connection listener that ends a fetch waiting on ``queue`` once the connection is
    closed for good (at once, not when the pull expires)."""

    def closed(event: ConnectionEvent) -> None:
        if event is ConnectionEvent.CLOSED and js.is_closed:
            queue.put_nowait(ConnectionClosedError("fetch: the connection is closed"))

    return closed


async def _fetched(
    queue: ItemQueue, options: FetchOptions, js: ApiClient, what: str, pin: PriorityPin | None
) -> AsyncIterator[PullMessage]:
    """The messages of one pull until it ends (complete, expired, refused, or silent for two
    heartbeats), undecodable ones included (they count in the pull's batch)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + options.expires + js.timeout  # longer than the pull
    silence = 2 * options.heartbeat if options.heartbeat else math.inf
    # A context around the caller's own client is not told when it closes: look every tick.
    tick = math.inf if js.connection_events.wired else _CLOSED_CHECK
    received = 0
    silent_at = loop.time() + silence
    while received < options.batch:
        wait = min(deadline, silent_at) - loop.time()
        try:
            item = await queue.get(timeout=max(0.0, min(wait, tick)))
        except TimeoutError:
            if js.is_closed:
                raise ConnectionClosedError(f"{what}: the connection is closed") from None
            if tick < wait:
                continue  # only a tick passed
            if silent_at < deadline:
                raise HeartbeatMissedError(
                    f"{what}: no message or heartbeat for {silence:g}s"
                ) from None
            return
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, PullMessage)
        silent_at = loop.time() + silence  # any message, heartbeats included, restarts it
        status, description = st.status_of(item.headers, reply=item.reply)
        if status is None:
            received += 1
            if pin is not None:
                pin.seen(item.headers)
            yield item
        elif status == st.HEARTBEAT:
            continue
        elif status == st.PIN_MISMATCH and pin is not None:
            pin.lost()  # another client is pinned: this pull gets nothing more
            return
        elif status in (st.NOT_FOUND, st.REQUEST_TIMEOUT) or (
            status == st.CONFLICT and hdr.PENDING_MESSAGES in item.headers
        ):
            return  # no more messages, the pull expired, or it is complete
        else:
            raise _status_error(status, description)


def _log_warning(error: JetStreamError) -> None:
    _log.warning("ordered consumer: %s", error)


def _status_error(status: str, description: str) -> JetStreamError:
    if status == st.NO_RESPONDERS:
        return NoRespondersError("no responders for the pull: consumer missing", code=503)
    return st.status_error(status, description, what="pull", default=PullRequestError)


def stream_replaced(info: StreamInfo, created: datetime | None, delivered: int) -> bool:
    """Whether ``info`` is of another stream than the one a consumer read up to sequence
    ``delivered`` (whose creation time was ``created``, when known): a stream's last sequence
    never goes below a sequence it delivered, and its creation time never changes."""
    if info.state.last_seq < delivered:
        return True
    return created is not None and info.created is not None and info.created != created


class OrderedConsumer(AsyncResource):
    """An ephemeral, in-order, gap-free view of a stream (ADR-37 ordered consumer).

    A memory-storage, ack-none consumer is created and, whenever delivery could have skipped
    something (a consumer sequence gap, missed heartbeats, the consumer deleted or missing, a
    reconnect), recreated from the last delivered stream sequence + 1, with backoff, as often as
    needed (``max_resets``, default unlimited). Iterate it with ``async for``; use it as an async
    context manager to clean up.

    A recreation that keeps failing (a paused or unreachable server) is retried for
    ``reset_deadline`` seconds, then iteration raises :class:`RequestTimeoutError`. By default a
    scan (``until_caught_up``) allows the context's ``retry_deadline``, so a listing ends in
    bounded time, while a consumer that follows new messages (a watch) retries forever.

    A deleted stream ends the iteration with :class:`StreamNotFoundError`, at once, and so
    does one created again under its name before the consumer is recreated (its sequences
    start over: resuming at the old position would skip its first messages). Each
    recreation asks the stream's info first: a stream whose last sequence is below the last
    delivered one is another stream; with ``detect_recreation`` (one request more before the
    first consumer, for long-lived watches) so is one whose creation time changed.

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
        max_messages: int = 500,
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
        self._options = pull_options(
            max_messages=max_messages, expires=max(2 * heartbeat, 30.0), heartbeat=heartbeat
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
        if not self.last_stream_seq and self._stream_created is None:
            return  # nothing read, nothing known: the stream there now is the one to read
        try:
            info = await stream_info(self._js, self.stream)
        except PermissionDeniedError:
            return  # may not look: the consumer create decides, as it did
        if stream_replaced(info, self._stream_created, self.last_stream_seq):
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
        """Stop pulling and delete the consumer (best effort)."""
        if self._closed:
            return
        self._closed = True
        if self._puller is not None:
            await self._puller.stop()
        if self._name:
            await self._forget(self._name)
        for task in list(self._forgetting):
            await asyncio.shield(task)  # never raises; a cancelled close() leaves it running

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
