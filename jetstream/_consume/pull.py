"""The pull engine under every consumer (ADR-37): one inbox for all pulls, status handling, idle
heartbeats, and recovery across reconnects, around the window accounting of
:mod:`jetstream._consume.pull_window` (when to pull and how much) and the options of
:mod:`jetstream._consume.pull_options`.

Statuses: ``Nats-Pending-*`` on any status give back what a pull did not deliver; 404, 408 and 409
Message Size Exceeds MaxBytes are not reported (a message that can never fit is, once); 409
Exceeded ... are warnings after which pulls keep to the consumer's limit; 409 Leadership Change
drops the waiting pulls; 503 (no responders) asks consumer info, rate-limited, and ends consume
with :class:`ConsumerDeletedError` when the consumer is gone; 400, 409 Consumer Deleted and 409
Consumer is push based end it; 423 (a pinned priority group's pin is another client's) drops the
pin and pulls again without it. The watch task sleeps until the missed-heartbeat deadline, a
rate-limited re-pull or a connection change told by the context (``connect`` wires nats-py's
callbacks; a context around an existing client is polled every ~0.1 s instead): while disconnected
the heartbeat clock is paused; after a reconnect pending is reset and a fresh pull goes out; a
closed connection ends consume with :class:`ConnectionClosedError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from typing import TYPE_CHECKING, Any, Final

from .. import headers as hdr
from .._api.client import ApiClient
from .._api.consumers import consumer_info
from .._errors import (
    ConnectionClosedError,
    ConsumerDeletedError,
    ConsumerNotFoundError,
    HeartbeatMissedError,
    JetStreamError,
    PullRequestError,
    StreamNotFoundError,
)
from .._protocol import status as st
from .._protocol.duration import go_duration_ns
from .._transport.events import ConnectionEvent
from .inbox import DeliveryInbox
from .keep_alive import BufferKeepAlive
from .priority import PriorityPin
from .pull_message import PullMessage, no_delivery, report_skipped, terminate
from .pull_options import PullOptions
from .pull_window import Limit, PullRequest, PullWindow
from .queue import ItemQueue, ResetReason, ResetSignal, cancel_and_wait

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

__all__ = ["Puller", "parse_exceeded"]

_log = logging.getLogger("jetstream")
_NS: Final = 1_000_000_000
_INFO_CHECK_EVERY: Final = 1.0
"""Seconds between consumer-info checks after pulls found no responders."""


class Puller:
    """Keeps one consumer's messages flowing into a queue (see the module docstring).

    ``on_error`` receives warnings (missed heartbeats, a consumer limit a pull was adjusted to,
    a message that can never fit ``max_bytes``) and is never fatal. With ``signal_resets`` missed
    heartbeats, a reconnect, no responders and a deleted consumer are put in the queue as
    :class:`ResetSignal` instead, for an owner that recreates the consumer. ``skip_now(puller,
    message)`` is offered an undecodable delivery that arrives with nothing queued before it;
    when it returns True (the owner skipped it) the message is not queued. ``ack_wait`` (the
    consumer's, in seconds) keeps buffered messages from timing out
    (:mod:`jetstream._consume.keep_alive`).

    With a pinned priority group the pin lasts only while pulls keep coming
    (``priority_timeout`` after the last one). When the window is full no pull goes out, so a
    *ping* does, at least every ``expires``: a pull that carries the pin but can take nothing
    (``max_bytes`` 1, smaller than any message: the server ends it with a 409 when a message
    is there) and whose reply subject nobody listens to (its statuses must not reach the
    window's accounting). A slow callback therefore keeps its pin, and another client does
    not get the next messages while this one still works through its buffer.
    """

    def __init__(
        self,
        js: ApiClient,
        stream: str,
        consumer: str,
        options: PullOptions,
        *,
        on_error: Callable[[JetStreamError], None] | None = None,
        signal_resets: bool = False,
        pin: PriorityPin | None = None,
        skip_now: Callable[[Puller, PullMessage], bool] | None = None,
        ack_wait: float | None = None,
    ) -> None:
        self._js = js
        self._pin = pin
        self._keeper = None if ack_wait is None else BufferKeepAlive(ack_wait)
        self._ping_inbox = ""  # the reply subject of pings: nobody listens to it
        self._requested_at = 0.0  # when the last pull or ping went out
        self._planned: float = 0.0  # when the sleeping watch wakes (inf: only when told)
        self._stream = stream
        self._consumer = consumer
        self._what = f"pull from {stream}/{consumer}"  # names it in every error and warning
        self._next_subject = js.api.consumer_next(stream, consumer)
        self._opts = options
        self._window = PullWindow(options)
        self._on_error = on_error
        self._signal_resets = signal_resets
        self._skip_now = skip_now
        self.queue = ItemQueue(js.ensure_open)  # a read from another loop: WrongEventLoopError
        self._inbox = DeliveryInbox(js, self._receive, sized=options.counts_sizes)
        self._subscribed = False
        self._sends: set[asyncio.Task[None]] = set()  # pulls being sent
        self._monitor: asyncio.Task[None] | None = None
        self._check: asyncio.Task[None] | None = None
        self._last_check = -_INFO_CHECK_EVERY
        self._warned: set[str] = set()  # warnings reported once per consume
        self._last_activity = 0.0
        self._reconnects = 0
        self._stopped = False
        self.ended = asyncio.Event()  # an end is queued: terminal error, reset, stop or drain
        self._draining = False
        self._tick = min(0.1, options.heartbeat / 4)  # polling, when connection events are not told
        self._wake: asyncio.Future[None] | None = None  # the watch's sleep
        self._kicked = False
        self.wakeups = 0
        """How often the watch woke (it must not poll: tests count)."""
        self.undecodable_seen = False
        """Whether an undecodable message was delivered (readers then look for them)."""

    # -- life cycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Subscribe and send the first pull.

        Raises:
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
        """
        self._js.ensure_open()
        nc = self._js.nc
        await self._inbox.open("subscribing for pulls")
        self._ping_inbox = nc.new_inbox()
        self._subscribed = True
        self._reconnects = nc.stats.get("reconnects", 0)
        self._loop = loop = asyncio.get_running_loop()
        # The loop's clock, read for every message: asyncio's own is time.monotonic behind
        # a Python method, called directly here (another loop's, e.g. uvloop's, as it is).
        asyncio_clock = type(loop).time is asyncio.BaseEventLoop.time
        self._clock = time.monotonic if asyncio_clock else loop.time
        self._last_activity = self._loop.time()
        await self._pull_more()
        self._monitor = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        """Stop at once: no more pulls, the subscription goes, buffered messages are dropped.
        The server is told within the request timeout (a frozen one must not hold a stop
        up); the subscription is gone from the client whatever happened to it before.

        Raises:
            WrongEventLoopError: called from another event loop than the context's own (its
                tasks cannot be stopped from there; nothing is changed).
        """
        if self._stopped and not self._subscribed:
            return
        self._js.check_loop()
        self._stopped = True
        for task in (self._monitor, self._check):
            if task is not None and task is not asyncio.current_task():
                await cancel_and_wait(task)
        for task in list(self._sends):
            await cancel_and_wait(task)
        if self._subscribed:
            self._subscribed = False
            await self._inbox.close()
        self.queue.put_nowait(None)
        self.ended.set()

    async def drain(self) -> None:
        """Stop pulling and end once what the server already sent is in the queue.

        The subscription is drained (unsubscribe, then one round trip): the server stops
        delivering to the pulls still waiting, so the end comes after one round trip, not after
        the pulls expire, and whatever state the connection is in (a drain while reconnecting
        ends too). What the server had not sent yet stays with the consumer (redelivered to
        the next pull, or after ``ack_wait`` if it was sent too late)."""
        if self._draining or self._stopped:
            return
        self._draining = True
        await self._inbox.drain()
        self.queue.put_nowait(None)
        self.ended.set()

    def took(self, message: PullMessage) -> None:
        """The caller took ``message`` from the queue: free its room in the window. Kept
        alive, one that waited long gets an in-progress on its way out, so that the caller
        has nearly all of its ``ack_wait``."""
        if self._window.taken(message.size):  # false for most messages
            self._schedule_pull()
        keeper = self._keeper
        if keeper is not None and keeper.stale(message, self._loop.time()):
            self._in_background(_refresh(message))

    async def skip(self, message: PullMessage) -> None:
        """Report a ``message`` the caller will not get: an undecodable one is counted and
        terminated so that it is not delivered again (no reader of ours can ever take it);
        one that is no delivery (see :func:`is_delivery`) is dropped."""
        if message.undecodable:
            report_skipped(self._js, message, self._stream, self._on_error)
            await terminate(message)
        elif self._on_error is not None:
            self._on_error(no_delivery(message, self._stream))
        else:
            _log.warning("%s", no_delivery(message, self._stream))

    # -- pulling ------------------------------------------------------------------------------

    def _next_pull(self) -> bytes | None:
        """The next pull request, counted as pending now (so it is asked for only once)."""
        if self._stopped or self._draining or not self._js.nc.is_connected:
            return None
        now = self._loop.time()
        idle = self._window.pending_msgs == 0
        pull = self._window.request(now)
        if pull is None:
            return None
        if idle:  # the heartbeat clock starts with the first pull out
            self._last_activity = now
            self._kick()
        self._requested_at = now
        return pull.encode(None if self._pin is None else self._pin.fields())

    def _schedule_pull(self) -> None:
        body = self._next_pull()
        if body is not None:
            self._in_background(self._send_pull(body))

    def _in_background(self, send: Coroutine[Any, Any, None]) -> None:
        task = self._loop.create_task(send)
        self._sends.add(task)  # referenced until done, cancelled by stop()
        task.add_done_callback(self._sends.discard)

    async def _pull_more(self) -> None:
        body = self._next_pull()
        if body is not None:
            await self._send_pull(body)

    async def _send_pull(self, body: bytes) -> None:
        try:
            await self._js.nc.publish(self._next_subject, body, reply=self._inbox.subject)
        except Exception:  # disconnected meanwhile: the watcher re-pulls on reconnect
            self._window.failed(self._loop.time())  # rate-limited, should it fail connected
            self._kick()

    # -- incoming -----------------------------------------------------------------------------

    def _receive(self, message: PullMessage) -> None:
        now = self._last_activity = self._clock()
        if message.reply:  # a delivery, whatever headers its writer gave it (see status_of)
            if self._stopped:
                return  # stopped, or a reset was asked for: nobody reads what comes after
            message.refreshed_at = now
            if self._pin is not None:
                self._pin.seen(message.headers)  # else a delivery's headers are left unparsed
            window = self._window
            window.delivered(message.size)
            if window.buffered_bytes > window.memory_cap:
                # A pull fitted to small messages brought large ones: start over from here
                # (the owner resumes after the last message taken), with a fitted window.
                over = JetStreamError(f"{self._what}: more buffered than its memory bound")
                self._reset_or(ResetReason.MEMORY, self._warn, over)
                return
            if message.undecodable:
                self.undecodable_seen = True
                # Next in line: the owner may skip it now, so that what it ends (a snapshot)
                # ends without waiting for a read that may never come.
                if not self.queue and self._skip_now is not None and self._skip_now(self, message):
                    self.took(message)
                    return
            self.queue.put_nowait(message)
            if self._keeper is not None and self._planned > now + self._keeper.every:
                self._kick()  # the watch sleeps past this message's refresh
            return
        headers = message.headers
        status, description = st.status_of(headers)
        if status is not None and not self._stopped:
            self._on_status(status, description, headers)
            if status != st.HEARTBEAT:
                self._kick()  # pending or a re-pull time changed

    def _on_status(self, status: str, description: str, headers: dict[str, str]) -> None:
        now = self._loop.time()
        if status == st.HEARTBEAT:
            return  # idle heartbeat: activity already noted
        if status == st.PIN_MISMATCH and self._pin is not None:
            # 423: another client holds the pin (or ours expired / was unpinned). Not an
            # error: pull without the pin; such a pull waits until the group pins it.
            self._pin.lost()
            if hdr.PENDING_MESSAGES not in headers:  # 2.15.1 always says; be safe if not
                self._window.failed(now)
                self._schedule_pull()
                return
        if hdr.PENDING_MESSAGES in headers:
            # 408 expired, 409 size exceeded / batch completed: what it did not deliver is back.
            too_large = status == st.CONFLICT and description == st.SIZE_EXCEEDS_MAX_BYTES
            if self._window.ended(
                int(headers.get(hdr.PENDING_MESSAGES, "0") or 0),
                int(headers.get(hdr.PENDING_BYTES, "0") or 0),
                now,
                too_large=too_large,
            ):
                self._never_fits()
            self._schedule_pull()
            return
        if status == st.NOT_FOUND:
            return  # ADR-37: not reported (only no_wait pulls get it, and consume sends none)
        if status == st.CONFLICT and description.startswith(st.EXCEEDED):
            self._over_limit(description, now)
            return
        if status == st.CONFLICT and description.startswith(st.LEADERSHIP_CHANGE):
            self._window.failed(now)  # the new leader has none of the waiting pulls
            return
        if status == st.NO_RESPONDERS:
            self._no_responders(now)
            return
        error = st.status_error(status, description, what=self._what, default=PullRequestError)
        if isinstance(error, ConsumerDeletedError):
            self._reset_or(ResetReason.DELETED, self._fail, error)
        else:
            self._fail(error)  # 400, push based, anything unknown: pulling again cannot help

    def _never_fits(self) -> None:
        limit = f"{self._opts.max_bytes} bytes" if self._opts.bytes_mode else "the pull"
        note = (
            f": the next message is larger than max_bytes ({limit}) and can never be "
            "delivered; use a larger max_bytes"
        )
        self._warn(
            st.status_error(st.CONFLICT, st.SIZE_EXCEEDS_MAX_BYTES, what=self._what, note=note)
        )

    def _over_limit(self, description: str, now: float) -> None:
        """409 Exceeded ...: a warning (reported once per limit); later pulls keep within it."""
        limit, value = parse_exceeded(description)
        self._window.refused(limit, value, now)
        if limit.value not in self._warned:
            self._warned.add(limit.value)
            note = "; pulls adjusted to the consumer's limit" if limit is not Limit.WAITING else ""
            self._warn(
                st.status_error(
                    st.CONFLICT, description, what=self._what, default=PullRequestError, note=note
                )
            )
        self._loop.call_at(self._window.retry_at, self._schedule_pull)

    def _no_responders(self, now: float) -> None:
        """503 on a pull: the consumer (or its stream) is gone, or has no leader yet. An owner
        that recreates consumers is told; otherwise consumer info decides (at most once a
        second): gone ends consume with ConsumerDeletedError, else pulls resume, rate-limited."""
        self._window.failed(now)
        missing = st.status_error(st.NO_RESPONDERS, "", what=self._what)
        if self._reset_or(ResetReason.NO_RESPONDERS, lambda _: None, missing):
            return
        if self._check is None and now - self._last_check >= _INFO_CHECK_EVERY:
            self._last_check = now
            self._check = self._loop.create_task(self._check_consumer())

    async def _check_consumer(self) -> None:
        try:
            await consumer_info(self._js, self._stream, self._consumer)
        except (ConsumerNotFoundError, StreamNotFoundError):
            # Gone for good: ended as the server ends the pulls of a deleted consumer.
            self._fail(st.status_error(st.CONFLICT, st.CONSUMER_DELETED, what=self._what))
            return
        except JetStreamError as exc:  # cannot tell (no info permission, no leader): go on
            note = f" (consumer info: {exc})"
            self._warn_once(st.status_error(st.NO_RESPONDERS, "", what=self._what, note=note))
        else:
            note = " (the consumer exists)"
            self._warn_once(st.status_error(st.NO_RESPONDERS, "", what=self._what, note=note))
        finally:
            self._check = None
        self._loop.call_at(self._window.retry_at, self._schedule_pull)

    # -- outcomes -----------------------------------------------------------------------------

    def _warn(self, error: JetStreamError) -> None:
        if self._on_error is not None:
            self._on_error(error)

    def _warn_once(self, error: JetStreamError) -> None:
        kind = type(error).__name__
        if kind not in self._warned:
            self._warned.add(kind)
            self._warn(error)

    def _fail(self, error: BaseException) -> None:
        """A terminal condition: the caller gets the error; nothing more is pulled."""
        if self._stopped:
            return
        self._stopped = True
        self.queue.put_nowait(error)
        self.ended.set()

    def _reset_or(
        self,
        reason: ResetReason,
        otherwise: Callable[[JetStreamError], None],
        error: JetStreamError,
    ) -> bool:
        """Hand the owner a reset request when it recreates consumers (and stop); otherwise
        report ``error`` through ``otherwise`` (``_fail`` or ``_warn``). True if it reset."""
        if not self._signal_resets:
            otherwise(error)
            return False
        self._stopped = True
        self.queue.put_nowait(ResetSignal(reason))
        self.ended.set()
        return True

    # -- connection and heartbeat watch -------------------------------------------------------

    async def _watch(self) -> None:
        """Sleep until something can need action, then act on the state (not on the event:
        the same checks serve a context whose connection events are not wired)."""
        events = self._js.connection_events
        events.add(self._on_connection_event)
        try:
            while not self._stopped:
                await self._sleep_until(self._wake_at())
                self.wakeups += 1
                if not await self._supervise():
                    return
        finally:
            events.remove(self._on_connection_event)

    def _wake_at(self) -> float | None:
        """When the watch must look again without being told: the missed-heartbeat deadline
        while a pull is out, a rate-limited re-pull; every tick when connection changes are not
        told (``JetStream(nc)``); None: only an event or a kick wakes it."""
        now = self._loop.time()
        if not self._js.connection_events.wired:
            return now + self._tick
        if self._draining or not self._js.nc.is_connected:
            return None  # a reconnect or close is told
        times = []
        if self._window.pending_msgs > 0:
            times.append(self._last_activity + 2 * self._window.heartbeat)
        if self._window.retry_at > now:
            times.append(self._window.retry_at)
        if self._keeper is not None:
            check = self._keeper.next_check(self.queue.messages())
            if check is not None:
                times.append(check)
        ping = self._ping_due()
        if ping is not None:
            times.append(ping)
        return min(times, default=None)

    async def _sleep_until(self, when: float | None) -> None:
        if self._kicked:  # a change while the watch was busy
            self._kicked = False
            return
        wake = self._loop.create_future()
        self._wake = wake
        self._planned = math.inf if when is None else when
        timer = None if when is None else self._loop.call_at(when, _resolve, wake)
        try:
            await wake
        finally:
            self._wake = None
            self._planned = 0.0  # awake: it looks at everything before it sleeps again
            self._kicked = False
            if timer is not None:
                timer.cancel()

    def _kick(self) -> None:
        """Make the watch look again now (a pull went out or was refused: its deadline moved)."""
        self._kicked = True
        if self._wake is not None:
            _resolve(self._wake)

    def _on_connection_event(self, event: ConnectionEvent) -> None:
        self._kick()

    async def _supervise(self) -> bool:
        """Act on the connection and heartbeat state; False when the watch is over."""
        loop = self._loop
        nc = self._js.nc
        if nc.is_closed or self._js.is_closed:  # for good: the caller must not wait on
            self._fail(ConnectionClosedError("consuming: the connection is closed"))
            return False
        if self._draining:
            return True
        if not nc.is_connected or self._window.pending_msgs == 0:
            # The heartbeat clock pauses while offline, and while no pull is out (a full
            # buffer): the server only sends heartbeats for a waiting pull.
            self._last_activity = loop.time()
            if not nc.is_connected:
                return True
        reconnects = nc.stats.get("reconnects", 0)
        if reconnects != self._reconnects:
            self._reconnects = reconnects
            self._last_activity = loop.time()
            self._window.reset()
            reconnected = JetStreamError("reconnected: pending reset, pulling again")
            if self._reset_or(ResetReason.RECONNECT, self._warn, reconnected):
                return False
        silent = loop.time() - self._last_activity
        if silent > 2 * self._window.heartbeat:
            self._last_activity = loop.time()
            self._window.reset()
            missed = HeartbeatMissedError(f"no message or heartbeat for {silent:.1f}s")
            if self._reset_or(ResetReason.HEARTBEAT, self._warn, missed):
                return False
        await self._pull_more()  # also a pull rate-limited or refused earlier
        await self._refresh_buffered()
        await self._keep_pin()
        return True

    async def _refresh_buffered(self) -> None:
        """An in-progress for each buffered message that has waited long (see
        :mod:`jetstream._consume.keep_alive`); best effort: a connection that failed meanwhile is
        the watch's next concern."""
        if self._keeper is None:
            return
        for message in self._keeper.due(self.queue.messages(), self._loop.time()):
            await _refresh(message)

    def _ping_due(self) -> float | None:
        """When a ping must keep the pin (None: no pin, or a pull is out that will end, and be
        followed by another pull or a ping, within ``expires``)."""
        pin = self._pin
        if pin is None or not pin.id or self._window.pending_msgs > 0:
            return None
        return self._requested_at + self._opts.expires

    async def _keep_pin(self) -> None:
        due = self._ping_due()
        now = self._loop.time()
        if due is None or due > now or self._pin is None:
            return
        self._requested_at = now
        ping = PullRequest(batch=1, max_bytes=1, expires=self._opts.expires, heartbeat=0)
        with contextlib.suppress(Exception):  # disconnected: the watch re-pulls on reconnect
            await self._js.nc.publish(
                self._next_subject, ping.encode(self._pin.fields()), reply=self._ping_inbox
            )


async def _refresh(message: PullMessage) -> None:
    """Restart ``message``'s ``ack_wait`` (best effort: a connection that failed meanwhile is
    the watch's concern; a reply subject that is not UTF-8 cannot be published to)."""
    with contextlib.suppress(JetStreamError, UnicodeError):
        await message.in_progress()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def parse_exceeded(description: str) -> tuple[Limit, float | None]:
    """The limit and its value from ``Exceeded MaxRequestBatch of 3`` (``... Expires of 2s``,
    ``... MaxBytes of 1000``, ``Exceeded MaxWaiting``); the value is None when absent."""
    name, _, value = description.removeprefix(st.EXCEEDED).partition(" of ")
    try:
        limit = Limit(name.strip())
    except ValueError:
        return Limit.WAITING, None
    if not value:
        return limit, None
    if limit is Limit.EXPIRES:
        ns = go_duration_ns(value.strip())
        return limit, None if ns is None else ns / _NS
    try:
        return limit, float(value.strip())
    except ValueError:
        return limit, None
