"""MessageStream: a continuous consume of a pull consumer, iterated or handed to a callback,
stopped or drained."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self

from .._errors import (
    JetStreamError,
)
from .._protocol.models import ConsumerConfig
from .._resource import AsyncResource
from .pull import Puller
from .pull_message import PullMessage, is_delivery
from .queue import cancel_and_wait

__all__ = ["ErrorCallback", "MessageCallback", "MessageStream", "StartingStream", "ack_deadline"]

ErrorCallback = Callable[[JetStreamError], None]
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

    async def ending(self) -> None:
        """Wait until the stream's end is on its way (a terminal condition, a stop or a
        drain), without taking a message: iterating then yields what came before the end,
        then raises the terminal error or stops."""
        await self._puller.ended.wait()

    async def _exit(self, error: BaseException | None) -> None:
        await self.stop()


def ack_deadline(config: ConsumerConfig | None) -> float | None:
    """Seconds after which the consumer's server gives a delivered message out again: the
    shortest of ``ack_wait`` (the server's default 30 s) and ``backoff`` (None: no acks)."""
    if config is None or config.ack_policy == "none":
        return None
    waits = [_SERVER_ACK_WAIT if config.ack_wait is None else config.ack_wait.total_seconds()]
    waits += [step.total_seconds() for step in config.backoff or ()]
    return min(waits)


class StartingStream:
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
