"""Downloads hand chunks from one long-lived task to the reader: a read starts a
fixed number of tasks whatever the object's size, holds no more chunks than its window, and a
cancelled read leaves neither its task nor its consumer behind."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Coroutine, Generator
from typing import Any

import msgspec
import pytest

import jetstream
import objstore
from objstore._download import window_messages
from tests.conftest import StoreFactory

CHUNK = objstore.DEFAULT_CHUNK_SIZE
CHUNKS = 96  # 12 MiB: more than the 8 MiB window


async def _store_with_object(
    make_store: StoreFactory,
) -> tuple[objstore.ObjectStore, objstore.ObjectInfo]:
    store = await make_store()
    info = await store.put("big", b"".join(bytes([i]) * CHUNK for i in range(CHUNKS)))
    return store, info


def _feed_tasks() -> list[asyncio.Task[Any]]:
    return [
        task
        for task in asyncio.all_tasks()
        if not task.done() and "ChunkFeed" in getattr(task.get_coro(), "__qualname__", "")
    ]


async def _consumers(js: jetstream.JetStream, store: objstore.ObjectStore) -> list[str]:
    return [name async for name in js.consumer_names(store.stream)]


async def _assert_nothing_left(js: jetstream.JetStream, store: objstore.ObjectStore) -> None:
    """No read's feed task is still running and no consumer is left on the server."""
    assert not _feed_tasks()
    assert await _consumers(js, store) == []


async def test_a_read_starts_a_fixed_number_of_tasks(
    js: jetstream.JetStream, make_store: StoreFactory
) -> None:
    """Before: one task per chunk (103 for 96 chunks), each awaited through asyncio.wait."""
    store, _ = await _store_with_object(make_store)
    loop = asyncio.get_running_loop()
    made: collections.Counter[str] = collections.Counter()

    def counting(
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine[Any, Any, Any] | Generator[Any, None, Any],
        **kwargs: Any,
    ) -> asyncio.Task[Any]:
        made[getattr(coro, "__qualname__", "?")] += 1
        return asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(counting)
    try:
        async with store.open("big") as reader:
            data = await reader.read()
    finally:
        loop.set_task_factory(None)
    assert data == b"".join(bytes([i]) * CHUNK for i in range(CHUNKS))
    # A few pull requests and the consumer's own tasks; nothing per chunk.
    assert sum(made.values()) < CHUNKS // 4, made
    assert made["ChunkFeed._move"] == 1


async def test_a_slow_read_holds_no_more_than_its_window(
    js: jetstream.JetStream, make_store: StoreFactory
) -> None:
    store, info = await _store_with_object(make_store)
    window = window_messages(info)
    async with store.open("big") as reader:
        assert len(await reader.__anext__()) == CHUNK
        (name,) = await _consumers(js, store)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20.0
        seen: list[int] = []
        # Sample while the read-ahead fills (well past half the window), then some more.
        while (len(seen) < 20 or seen[-1] <= window // 2) and loop.time() < deadline:
            info_now = await js.consumer_info(store.stream, name)
            seen.append(info_now.delivered.consumer_seq)
        assert seen[-1] > window // 2, "the read-ahead did fill"
        assert max(seen) <= window + 1, "one taken, at most a window's worth held"
        rest = [chunk async for chunk in reader]
    assert len(rest) == CHUNKS - 1


async def test_a_cancelled_read_leaves_no_task_and_no_consumer(
    js: jetstream.JetStream, make_store: StoreFactory
) -> None:
    store, _ = await _store_with_object(make_store)
    stuck = asyncio.Event()

    async def read_some() -> None:
        async with store.open("big") as reader:
            received = 0
            async for _chunk in reader:
                received += 1
                if received == 5:
                    stuck.set()
                    await asyncio.Event().wait()  # a caller that stops reading

    for _ in range(5):  # the feed's task is at a different point each time
        stuck.clear()
        reading = asyncio.ensure_future(read_some())
        await stuck.wait()
        reading.cancel()
        await asyncio.wait([reading])
        assert reading.cancelled()
        await _assert_nothing_left(js, store)


async def test_a_failed_read_without_async_with_leaves_no_task_and_no_consumer(
    js: jetstream.JetStream, make_store: StoreFactory
) -> None:
    """``ObjectReader`` is public and iterable without ``async with``: a read that fails
    (here a meta record promising less than is stored) must still end its feed and consumer."""
    store, info = await _store_with_object(make_store)
    reader = objstore.ObjectReader(store, msgspec.structs.replace(info, size=info.size - 100))
    with pytest.raises(objstore.DigestMismatchError):
        await reader.read()
    await _assert_nothing_left(js, store)


async def test_reading_after_the_block_ended_creates_no_consumer(
    js: jetstream.JetStream, make_store: StoreFactory
) -> None:
    store, _ = await _store_with_object(make_store)
    async with store.open("big") as reader:
        pass
    with pytest.raises(jetstream.JetStreamError):
        await reader.read()
    await _assert_nothing_left(js, store)
