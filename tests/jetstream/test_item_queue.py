"""ItemQueue: the one-reader queue between a puller and its consumer's iterator."""

from __future__ import annotations

import asyncio

import pytest

from jetstream._consume.pull_message import PullMessage
from jetstream._consume.queue import ItemQueue


async def test_get_with_timeout_raises_when_nothing_arrives() -> None:
    queue = ItemQueue()
    with pytest.raises(TimeoutError):
        await queue.get(timeout=0.01)


async def test_an_item_put_after_a_timeout_is_still_delivered() -> None:
    queue = ItemQueue()
    with pytest.raises(TimeoutError):
        await queue.get(timeout=0.01)
    queue.put_nowait(None)
    assert await queue.get(timeout=5) is None


async def test_get_with_timeout_wakes_on_a_put_and_keeps_order() -> None:
    queue = ItemQueue()
    waiting = asyncio.ensure_future(queue.get(timeout=30))
    await asyncio.sleep(0)  # the getter is parked on its waiter
    queue.put_nowait(TimeoutError("first"))
    queue.put_nowait(None)
    first = await waiting
    assert isinstance(first, TimeoutError) and str(first) == "first"
    assert await queue.get() is None


async def test_peek_message_shows_only_a_message_at_the_head() -> None:
    queue = ItemQueue()
    assert queue.peek_message() is None
    message = PullMessage("s", "r", b"", {}, 0, None)  # type: ignore[arg-type]
    queue.put_nowait(message)
    queue.put_nowait(None)
    assert queue.peek_message() is message, "left in place"
    assert queue.peek_message() is message
    queue.drop_oldest()
    assert queue.peek_message() is None, "a stop signal is not a message"
    assert await queue.get(timeout=1) is None
