"""Pull consumers (ADR-37): ``Consumer`` with consume / fetch / next (a consume is a
:class:`~jetstream._consume.message_stream.MessageStream`; ordered consumers live in
:mod:`jetstream._consume.ordered`).

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
import logging
import math
from collections.abc import AsyncIterator, Callable

import msgspec

from .. import headers as hdr
from .._api.client import ApiClient
from .._api.consumers import consumer_info
from .._errors import (
    ClientValidationError,
    ConnectionClosedError,
    HeartbeatMissedError,
    PullRequestError,
    RequestTimeoutError,
)
from .._listing import AsyncListing
from .._protocol import status as st
from .._protocol.duration import DurationValue, seconds_of
from .._protocol.models import ConsumerInfo
from .._resource import aclose_iterator
from .._transport.events import ConnectionEvent
from .._transport.nats_errors import nats_errors
from .inbox import DeliveryInbox
from .message_stream import (
    ErrorCallback,
    MessageCallback,
    MessageStream,
    StartingStream,
    ack_deadline,
)
from .priority import PriorityPin
from .pull import Puller
from .pull_message import PullMessage, is_delivery, no_delivery, report_skipped, terminate
from .pull_options import DEFAULT_EXPIRES, FetchOptions, fetch_options, pull_options
from .queue import ItemQueue

__all__ = ["Consumer"]

_log = logging.getLogger("jetstream")
_CLOSED_CHECK = 0.1  # seconds between looks at a connection whose closing is not told


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
    ) -> StartingStream:
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
            ClientValidationError: conflicting or out-of-range options, a bad ``group``
                name, or ``max_bytes`` for a ``last_per_subject`` consumer (whose messages
                nats-server can skip under such pulls) (at once, nothing sent).
        """
        pin = self._pin(group)
        _check_byte_bound(self.cached_info, max_bytes)
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
            ack_wait=ack_deadline(self.cached_info.config) if keep_buffered else None,
        )
        return StartingStream(MessageStream(puller, callback, error_callback))

    def fetch(
        self,
        max_messages: int | None = None,
        *,
        max_bytes: int | None = None,
        expires: DurationValue = DEFAULT_EXPIRES,
        heartbeat: DurationValue | None = None,
        group: str | None = None,
    ) -> AsyncListing[PullMessage]:
        """One pull: up to ``max_messages`` (default 1) or ``max_bytes`` worth of messages,
        ending when the pull is complete, expires, or no more messages will come; ``async
        for`` them or ``await`` a list (the pull is sent when the first is asked for, and
        errors raise from the reading). ``heartbeat`` asks the server for idle heartbeats
        (0.5..30 s, at most ``expires / 2``; on by default, 5 s, for ``expires`` above 30 s):
        two missed end the fetch.
        ``group``: the priority group to pull in, as in :meth:`consume`; a ``423`` (another
        client is pinned) ends the fetch without an error and forgets the pin.

        Raises:
            ClientValidationError: both limits, a limit below 1, ``expires`` not positive, a
                heartbeat out of range, a bad ``group``, or ``max_bytes`` for a
                ``last_per_subject`` consumer (nothing is sent).
            ConsumerDeletedError, PullRequestError: the server refused or ended the pull.
            NoRespondersError: no such consumer.
            HeartbeatMissedError: the pull went silent for two heartbeats.
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
        """
        return AsyncListing(
            self._pull(max_messages, max_bytes, expires=expires, heartbeat=heartbeat, group=group)
        )

    async def _pull(
        self,
        max_messages: int | None,
        max_bytes: int | None,
        *,
        expires: DurationValue,
        heartbeat: DurationValue | None,
        group: str | None,
    ) -> AsyncIterator[PullMessage]:
        options = fetch_options(
            max_messages=max_messages, max_bytes=max_bytes, expires=expires, heartbeat=heartbeat
        )
        _check_byte_bound(self.cached_info, max_bytes)
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


def _check_byte_bound(info: ConsumerInfo, max_bytes: int | None) -> None:
    """Refuse pulls bounded in bytes from a ``last_per_subject`` consumer: nats-server (2.15)
    delivers its first pass from a list of each subject's last message, and when a pull's
    bytes cannot take the next one, it puts back the stream position but not the list's, so
    that message is never delivered. Counted pulls are not affected.

    Raises:
        ClientValidationError: ``max_bytes`` for such a consumer.
    """
    config = info.config
    if max_bytes is not None and config is not None and config.deliver_policy == "last_per_subject":
        raise ClientValidationError(
            f"max_bytes is refused for consumer {info.name!r} (deliver_policy "
            "last_per_subject): nats-server skips a subject's last message for good when a "
            "pull's max_bytes cannot take it; use max_messages"
        )


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
            raise st.status_error(status, description, what=what, default=PullRequestError)
