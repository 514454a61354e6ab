"""The pull engine under every consumer (ADR-37): one inbox for all pulls, pending accounting,
status handling, idle heartbeats, and recovery across reconnects.

:class:`Puller` keeps ``max_messages`` (or ``max_bytes``) requested-or-buffered: a message
counts from the pull that asks for it until the caller takes it, so the buffer never holds more
than one window whatever the caller's speed. When what is outstanding falls to the threshold
(default half) it pulls the difference. ``Nats-Pending-Messages/Bytes`` on 408/409 statuses give
back what an expired or completed pull did not deliver. It watches the connection itself (no
callbacks needed): while disconnected the heartbeat clock is paused; after a reconnect pending
is reset and a fresh pull goes out.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import enum
from typing import TYPE_CHECKING, Any, Final

import msgspec
from nats.aio.msg import Msg

from . import _status as st
from . import headers as hdr
from ._duration import DurationValue, seconds_of
from ._errors import (
    ClientValidationError,
    ConnectionClosedError,
    ConsumerDeletedError,
    HeartbeatMissedError,
    JetStreamError,
    NoRespondersError,
    PullRequestError,
)
from ._message import AckReply, parse_ack_reply
from ._nats_errors import nats_errors

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._context import JetStream

__all__ = [
    "ItemQueue",
    "PullMessage",
    "PullOptions",
    "Puller",
    "ResetSignal",
    "cancel_and_wait",
    "pull_options",
]

DEFAULT_MAX_MESSAGES: Final = 500
DEFAULT_EXPIRES: Final = 30.0
BYTES_MODE_BATCH: Final = 1_000_000
_MIN_EXPIRES: Final = 1.0
_MAX_HEARTBEAT: Final = 30.0
_MIN_HEARTBEAT: Final = 0.5
_NS: Final = 1_000_000_000


class PullMessage:
    """A message delivered by a consumer, with its acknowledgement methods."""

    __slots__ = ("_meta", "_nc", "data", "headers", "reply", "size", "subject")

    def __init__(self, msg: Msg, size: int) -> None:
        self.subject: str = msg.subject
        self.data: bytes = msg.data
        self.headers: dict[str, str] = msg.headers or {}  # nats-py's own dict, not copied
        self.reply: str = msg.reply
        self.size = size
        self._nc = msg._client
        self._meta: AckReply | None = None

    @property
    def metadata(self) -> AckReply:
        """Stream and consumer sequences, delivery count, time and pending, from the reply."""
        if self._meta is None:
            self._meta = parse_ack_reply(self.reply)
        return self._meta

    async def ack(self) -> None:
        """Acknowledge (consumers with ``ack_policy`` explicit or all).

        Raises:
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
        """
        await self._reply_with(b"+ACK")

    async def nak(self, delay: float | None = None) -> None:
        """Ask for redelivery, after ``delay`` seconds if given."""
        body = b"-NAK" if delay is None else b'-NAK {"delay":%d}' % int(delay * _NS)
        await self._reply_with(body)

    async def in_progress(self) -> None:
        """Reset the ack timer: still working on it."""
        await self._reply_with(b"+WPI")

    async def term(self) -> None:
        """Never redeliver."""
        await self._reply_with(b"+TERM")

    async def _reply_with(self, body: bytes) -> None:
        """Send an acknowledgement (nak, term...); the same errors as :meth:`ack`."""
        with nats_errors(f"acknowledging {self.subject}"):
            await self._nc.publish(self.reply, body)

    def __repr__(self) -> str:
        return f"<PullMessage {self.subject} {len(self.data)}B>"


@dataclasses.dataclass(frozen=True)
class PullOptions:
    """Validated consume/fetch options (see :func:`pull_options`)."""

    max_messages: int
    max_bytes: int
    expires: float
    heartbeat: float
    threshold_messages: int
    threshold_bytes: int

    @property
    def bytes_mode(self) -> bool:
        return self.max_bytes > 0


def pull_options(
    *,
    max_messages: int | None = None,
    max_bytes: int | None = None,
    expires: DurationValue = DEFAULT_EXPIRES,
    heartbeat: DurationValue | None = None,
    threshold_messages: int | None = None,
    threshold_bytes: int | None = None,
) -> PullOptions:
    """Check and complete consume options with ADR-37's defaults.

    ``max_messages`` (default 500) **or** ``max_bytes`` bounds the buffer; ``expires`` (>= 1 s,
    default 30 s; seconds, a ``timedelta`` or ``"30s"``) is each pull's lifetime; ``heartbeat``
    defaults to ``expires / 2`` capped to 0.5..30 s and may not exceed ``expires / 2``;
    thresholds default to half the buffer.

    Raises:
        ClientValidationError: both limits, a non-positive limit, ``expires`` below 1 s, or a
            heartbeat out of range.
    """
    if max_messages is not None and max_bytes is not None:
        raise ClientValidationError("give max_messages or max_bytes, not both")
    if max_bytes is not None and max_bytes < 1:
        raise ClientValidationError(f"max_bytes must be positive: {max_bytes}")
    if max_messages is not None and max_messages < 1:
        raise ClientValidationError(f"max_messages must be positive: {max_messages}")
    expires = seconds_of(expires, name="expires")
    if heartbeat is not None:
        heartbeat = seconds_of(heartbeat, name="heartbeat")
    if expires < _MIN_EXPIRES:
        raise ClientValidationError(f"expires must be at least {_MIN_EXPIRES:g}s: {expires}")
    if heartbeat is None:
        heartbeat = max(_MIN_HEARTBEAT, min(expires / 2, _MAX_HEARTBEAT))
    if not _MIN_HEARTBEAT <= heartbeat <= expires / 2:
        raise ClientValidationError(
            f"heartbeat must be between {_MIN_HEARTBEAT:g}s and expires/2: {heartbeat}"
        )
    messages = max_messages if max_messages is not None else DEFAULT_MAX_MESSAGES
    limit_bytes = max_bytes or 0
    return PullOptions(
        max_messages=BYTES_MODE_BATCH if limit_bytes else messages,
        max_bytes=limit_bytes,
        expires=expires,
        heartbeat=heartbeat,
        threshold_messages=threshold_messages if threshold_messages is not None else messages // 2,
        threshold_bytes=threshold_bytes if threshold_bytes is not None else limit_bytes // 2,
    )


class ResetReason(enum.Enum):
    HEARTBEAT = "missed heartbeats"
    RECONNECT = "reconnected"
    DELETED = "consumer deleted"
    NO_RESPONDERS = "consumer not found"


@dataclasses.dataclass(frozen=True)
class ResetSignal:
    """Put in the queue instead of a warning/error when the owner recreates consumers."""

    reason: ResetReason


Item = PullMessage | ResetSignal | BaseException | None
"""What the queue yields: a message, a reset request, a terminal error, or None (stopped)."""


class ItemQueue:
    """A one-reader queue: a deque plus a wake-up future, cheaper per item than asyncio.Queue
    (this is on the per-message path of every watch)."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: collections.deque[Item] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: Item) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> Item:
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        return self._items.popleft()


def message_size(msg: Msg) -> int:
    """A message's size as the server counts it: subject + reply + headers + payload."""
    header_len = 0
    if msg.headers:
        header_len = 12 + sum(len(k) + len(v) + 4 for k, v in msg.headers.items())
    return len(msg.subject) + len(msg.reply) + header_len + len(msg.data)


async def cancel_and_wait(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` and wait until it ended. A cancel of the *caller* meanwhile still
    propagates (suppressing CancelledError around ``await task`` would swallow it, and an
    iteration cancelled during a consumer reset then waited for messages forever)."""
    task.cancel()
    await asyncio.wait([task])


class Puller:
    """Keeps one consumer's messages flowing into a queue (see the module docstring).

    ``on_error`` receives warnings (missed heartbeats, no responders) and is never fatal.
    With ``signal_resets`` those conditions, a reconnect and a deleted consumer are put in the
    queue as :class:`ResetSignal` instead, for an owner that recreates the consumer.
    """

    def __init__(
        self,
        js: JetStream,
        stream: str,
        consumer: str,
        options: PullOptions,
        *,
        on_error: Callable[[JetStreamError], None] | None = None,
        signal_resets: bool = False,
    ) -> None:
        self._js = js
        self._next_subject = js.api.consumer_next(stream, consumer)
        self._opts = options
        self._on_error = on_error
        self._signal_resets = signal_resets
        self.queue = ItemQueue()
        self._pending_msgs = 0  # requested, not delivered
        self._pending_bytes = 0
        self._buffered_msgs = 0  # delivered, not taken
        self._buffered_bytes = 0
        self._sub: Any = None
        self._monitor: asyncio.Task[None] | None = None
        self._last_activity = 0.0
        self._reconnects = 0
        self._stopped = False
        self._draining = False

    # -- life cycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        self._js.ensure_open()
        nc = self._js.nc
        inbox = nc.new_inbox()
        with nats_errors("subscribing for pulls"):
            self._sub = await nc.subscribe(inbox, cb=self._on_msg)
        self._inbox = inbox
        self._reconnects = nc.stats.get("reconnects", 0)
        self._loop = asyncio.get_running_loop()
        self._last_activity = self._loop.time()
        await self._pull_more()
        self._monitor = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        """Stop at once: no more pulls, the subscription goes, buffered messages are dropped."""
        if self._stopped:
            return
        self._stopped = True
        if self._monitor is not None:
            await cancel_and_wait(self._monitor)
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
        self.queue.put_nowait(None)

    def drain(self) -> None:
        """Stop pulling; the caller gets what is buffered and in flight, then the end."""
        self._draining = True
        if self._pending_msgs <= 0:
            self.queue.put_nowait(None)

    def took(self, message: PullMessage) -> None:
        """The caller took ``message`` from the queue: free its room in the window."""
        self._buffered_msgs -= 1
        self._buffered_bytes -= message.size
        if self._pending_msgs + self._buffered_msgs <= self._opts.threshold_messages or (
            self._opts.bytes_mode
        ):  # cheap test first: this runs for every message
            self._schedule_pull()

    # -- pulling ------------------------------------------------------------------------------

    def _outstanding(self) -> tuple[int, int]:
        return (
            self._pending_msgs + self._buffered_msgs,
            self._pending_bytes + self._buffered_bytes,
        )

    def _needs_pull(self) -> bool:
        if self._stopped or self._draining:
            return False
        msgs, size = self._outstanding()
        if self._opts.bytes_mode:
            return size <= self._opts.threshold_bytes
        return msgs <= self._opts.threshold_messages

    def _schedule_pull(self) -> None:
        body = self._next_pull()
        if body is not None:
            self._loop.create_task(self._send_pull(body))

    async def _pull_more(self) -> None:
        body = self._next_pull()
        if body is not None:
            await self._send_pull(body)

    def _next_pull(self) -> bytes | None:
        """The next pull request, counted as pending now (so it is asked for only once)."""
        if not self._needs_pull() or not self._js.nc.is_connected:
            return None
        msgs, size = self._outstanding()
        request: dict[str, int] = {
            "expires": int(self._opts.expires * _NS),
            "idle_heartbeat": int(self._opts.heartbeat * _NS),
        }
        if self._opts.bytes_mode:
            request["batch"] = BYTES_MODE_BATCH
            request["max_bytes"] = self._opts.max_bytes - size
            self._pending_bytes += request["max_bytes"]
        else:
            request["batch"] = self._opts.max_messages - msgs
        self._pending_msgs += request["batch"]
        return msgspec.json.encode(request)

    async def _send_pull(self, body: bytes) -> None:
        try:
            await self._js.nc.publish(self._next_subject, body, reply=self._inbox)
        except Exception as exc:  # disconnected meanwhile: the watcher re-pulls on reconnect
            self._warn(JetStreamError(f"pull request not sent: {exc}"))

    def _reset_pending(self) -> None:
        self._pending_msgs = 0
        self._pending_bytes = 0

    # -- incoming -----------------------------------------------------------------------------

    async def _on_msg(self, msg: Msg) -> None:
        self._last_activity = self._loop.time()
        headers = msg.headers or {}
        status, description = st.status_of(headers)
        if status is None and msg.reply:
            size = message_size(msg) if self._opts.bytes_mode else 0  # only bytes mode counts
            self._pending_msgs -= 1
            self._pending_bytes -= size
            self._buffered_msgs += 1
            self._buffered_bytes += size
            self.queue.put_nowait(PullMessage(msg, size))
            if self._draining and self._pending_msgs <= 0:
                self.queue.put_nowait(None)
            return
        if status is not None:
            self._on_status(status, description, headers)

    def _on_status(self, status: str, description: str, headers: dict[str, str]) -> None:
        if status == st.HEARTBEAT:
            return  # idle heartbeat: activity already noted
        if status in (st.REQUEST_TIMEOUT, st.CONFLICT) and hdr.PENDING_MESSAGES in headers:
            # An expired or completed pull gives back what it did not deliver.
            self._pending_msgs -= int(headers.get(hdr.PENDING_MESSAGES, "0"))
            self._pending_bytes -= int(headers.get(hdr.PENDING_BYTES, "0"))
            if self._draining and self._pending_msgs <= 0:
                self.queue.put_nowait(None)
            self._schedule_pull()
            return
        if status == st.NOT_FOUND or (
            status == st.CONFLICT and description.startswith("Exceeded MaxWaiting")
        ):
            self._warn(PullRequestError(f"pull: {status} {description}", code=int(status)))
            return
        if status == st.NO_RESPONDERS:
            self._reset_pending()
            missing = NoRespondersError("no responders for the pull: consumer missing", code=503)
            self._reset_or(ResetReason.NO_RESPONDERS, self._warn, missing)
            return
        error = st.status_error(status, description, what="pull", default=PullRequestError)
        if isinstance(error, ConsumerDeletedError):
            self._reset_or(ResetReason.DELETED, self._fail, error)
        else:
            self._fail(error)

    # -- outcomes -----------------------------------------------------------------------------

    def _warn(self, error: JetStreamError) -> None:
        if self._on_error is not None:
            self._on_error(error)

    def _fail(self, error: BaseException) -> None:
        """A terminal condition: the caller gets the error; nothing more is pulled."""
        self._stopped = True
        self.queue.put_nowait(error)

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
        return True

    # -- connection and heartbeat watch -------------------------------------------------------

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        tick = min(0.1, self._opts.heartbeat / 4)
        while not self._stopped:
            await asyncio.sleep(tick)
            nc = self._js.nc
            if nc.is_closed or self._js.is_closed:  # for good: the caller must not wait on
                self._fail(ConnectionClosedError("consuming: the connection is closed"))
                return
            if not nc.is_connected:
                self._last_activity = loop.time()  # the heartbeat clock pauses while offline
                continue
            reconnects = nc.stats.get("reconnects", 0)
            if reconnects != self._reconnects:
                self._reconnects = reconnects
                self._last_activity = loop.time()
                self._reset_pending()
                reconnected = JetStreamError("reconnected: pending reset, pulling again")
                if self._reset_or(ResetReason.RECONNECT, self._warn, reconnected):
                    return
                await self._pull_more()
                continue
            silent = loop.time() - self._last_activity
            if silent > 2 * self._opts.heartbeat and not self._draining:
                self._last_activity = loop.time()
                self._reset_pending()
                missed = HeartbeatMissedError(f"no message or heartbeat for {silent:.1f}s")
                self._reset_or(ResetReason.HEARTBEAT, self._warn, missed)
                await self._pull_more()
