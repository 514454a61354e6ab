"""ChunkFeed: a consumer's messages moved by one long-lived task into a bounded buffer
that a reader takes from without awaiting.

Why: a download awaited the consumer through a new task and an ``asyncio.wait`` with a
timeout for every chunk (the idle and stall checks must not cancel a consumer reset half way),
about three loop turns per chunk. The feed's one task keeps the consumer's ``__anext__``
uncancelled between checks, and a reader that finds chunks buffered takes them at once; it
waits (on one future, woken by the feed or by a timer) only when the buffer is empty.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from typing import Generic, TypeVar

from jetstream import JetStreamError

__all__ = ["ChunkFeed"]

T = TypeVar("T")


class ChunkFeed(Generic[T]):
    """Moves ``consumer``'s messages into a buffer of at most ``limit`` messages (the task
    waits while it is full and resumes once the reader has taken half of it, so memory stays
    bounded and the task wakes once per half buffer, not once per chunk)."""

    __slots__ = ("_consumer", "_error", "_limit", "_ready", "_room", "_task", "_waiter")

    def __init__(self, consumer: AsyncIterator[T], limit: int) -> None:
        self._consumer = consumer
        self._limit = max(1, limit)
        self._ready: collections.deque[T] = collections.deque()
        self._error: BaseException | None = None  # the consumer failed or ended
        self._waiter: asyncio.Future[None] | None = None  # the reader, waiting for a message
        self._room: asyncio.Future[None] | None = None  # the task, waiting for room
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start moving messages (call once the consumer exists)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._move())

    async def _move(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            async for message in self._consumer:
                self._ready.append(message)
                _wake(self._waiter)
                if len(self._ready) >= self._limit:
                    self._room = loop.create_future()
                    await self._room
                    self._room = None
            self._error = JetStreamError("the chunk consumer ended before the last chunk")
        except Exception as exc:  # handed to the reader, raised where it takes the next chunk
            self._error = exc
        _wake(self._waiter)

    def take(self) -> T | None:
        """The next buffered message, or None when none is buffered yet.

        Raises:
            whatever the consumer raised (after every message it delivered was taken);
            JetStreamError when it ended (closed) without an error.
        """
        if self._ready:
            message = self._ready.popleft()
            if self._room is not None and len(self._ready) <= self._limit // 2:
                _wake(self._room)
            return message
        if self._error is not None:
            raise self._error
        return None

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a message (or the consumer's error): True when
        :meth:`take` has one for the caller, False when the time ran out. Cancelling the
        caller leaves the feed and its consumer untouched."""
        if self._ready or self._error is not None:
            return True
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(timeout, _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None
        return bool(self._ready) or self._error is not None

    async def close(self) -> None:
        """Stop the task and drop what is buffered (the consumer is the caller's to close)."""
        task, self._task = self._task, None
        self._ready.clear()
        if task is None:
            return
        task.cancel()
        await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: nothing after the read ended matters


def _wake(future: asyncio.Future[None] | None) -> None:
    if future is not None and not future.done():
        future.set_result(None)
