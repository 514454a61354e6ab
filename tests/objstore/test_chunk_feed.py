"""ChunkFeed: a download's hand-off from its consumer to its reader keeps order, never buffers
more than its limit, hands the consumer's error over after the messages before it, times a
wait out without touching the consumer, and stops its one task on close."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

import jetstream
from objstore._feed import ChunkFeed


class Source:
    """A consumer stand-in: ``count`` numbers, then ``error`` (or the end); counts what it
    produced; waits for ``gate`` before every item when one is given."""

    def __init__(
        self, count: int, error: Exception | None = None, gate: asyncio.Event | None = None
    ) -> None:
        self.produced = 0
        self.closed = False
        self._count = count
        self._error = error
        self._gate = gate

    async def items(self) -> AsyncIterator[int]:
        try:
            while self.produced < self._count:
                if self._gate is not None:
                    await self._gate.wait()
                self.produced += 1
                yield self.produced
            if self._error is not None:
                raise self._error
        finally:
            self.closed = True


def _movers() -> list[asyncio.Task[object]]:
    """The feed tasks still running."""
    return [
        task
        for task in asyncio.all_tasks()
        if not task.done() and "ChunkFeed" in task.get_coro().__qualname__  # type: ignore[union-attr]
    ]


async def _turns(n: int = 50) -> None:
    """Let the feed's task run as far as it can (it awaits nothing outside the loop)."""
    for _ in range(n):
        await asyncio.sleep(0)


async def test_order_and_the_buffer_bound() -> None:
    source = Source(100)
    feed: ChunkFeed[int] = ChunkFeed(source.items(), 8)
    feed.start()
    await _turns()
    assert source.produced == 8, "the task stops once the buffer is full"
    got = [feed.take() for _ in range(3)]
    await _turns()
    assert source.produced == 8, "not woken before half the buffer is taken"
    got.append(feed.take())
    await _turns()
    assert source.produced == 12, "refilled once half was taken"
    while len(got) < 100:
        item = feed.take()
        if item is None:
            assert await feed.wait(5.0)
            continue
        got.append(item)
    assert got == list(range(1, 101))
    await feed.close()
    assert not _movers()


async def test_the_error_comes_after_the_messages_before_it() -> None:
    feed: ChunkFeed[int] = ChunkFeed(Source(2, jetstream.JetStreamError("boom")).items(), 8)
    feed.start()
    assert await feed.wait(5.0)
    await _turns()
    assert [feed.take(), feed.take()] == [1, 2]
    with pytest.raises(jetstream.JetStreamError, match="boom"):
        feed.take()
    assert await feed.wait(5.0), "an error is something to take"
    await feed.close()


async def test_a_consumer_that_ends_early_is_an_error() -> None:
    feed: ChunkFeed[int] = ChunkFeed(Source(1).items(), 8)
    feed.start()
    assert await feed.wait(5.0)
    await _turns()
    assert feed.take() == 1
    with pytest.raises(jetstream.JetStreamError, match="ended before the last chunk"):
        feed.take()
    await feed.close()


async def test_a_wait_times_out_and_a_cancelled_wait_leaves_the_feed_working() -> None:
    gate = asyncio.Event()
    source = Source(3, gate=gate)
    feed: ChunkFeed[int] = ChunkFeed(source.items(), 8)
    feed.start()
    assert await feed.wait(0.01) is False
    assert feed.take() is None
    waiting = asyncio.ensure_future(feed.wait(60.0))
    await _turns()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    gate.set()
    assert await feed.wait(5.0)
    assert feed.take() == 1
    await feed.close()
    assert source.closed


async def test_close_stops_the_task_and_drops_the_buffer() -> None:
    source = Source(1000)
    feed: ChunkFeed[int] = ChunkFeed(source.items(), 4)
    await feed.close()  # never started: nothing to stop
    feed = ChunkFeed(source.items(), 4)
    feed.start()
    await _turns()
    assert source.produced == 4
    await feed.close()
    assert not _movers(), "the task is gone"
    assert feed.take() is None, "the buffer is dropped"
    await _turns()
    assert source.produced == 4
