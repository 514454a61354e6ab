"""Watching a bucket: an initial snapshot of many keys, then a stream of updates, vs nats-py's
``kv.watchall()``. Both watchers face the same writer (``put_many`` in batches of 1000)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import nats
from nats.js.kv import KeyValue

import jetstream
import kvstore

from ._harness import Scenario

VALUE = b"v" * 100
BUCKET = "bench_watch"


@asynccontextmanager
async def watch_bucket(url: str, keys: int) -> AsyncIterator[tuple[kvstore.Bucket, KeyValue]]:
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.create_bucket(js, BUCKET)
        for start in range(0, keys, 1000):
            await bucket.put_many({f"k{i}": VALUE for i in range(start, min(start + 1000, keys))})
        peer = await nats.connect(url)
        try:
            yield bucket, await peer.jetstream().key_value(BUCKET)
        finally:
            await peer.close()
            await kvstore.delete_bucket(js, BUCKET)


def watch_scenario(bucket: kvstore.Bucket, peer_kv: KeyValue, keys: int, updates: int) -> Scenario:
    async def write_updates() -> None:
        for start in range(0, updates, 1000):
            batch = {f"k{i}": b"u" * 100 for i in range(start, min(start + 1000, updates))}
            await bucket.put_many(batch)

    async def ours() -> None:
        async with bucket.watch() as watcher:
            await _drain(watcher, keys, updates, write_updates, lambda e: False)

    async def peer() -> None:
        watcher = await peer_kv.watchall()
        try:
            await _drain(watcher, keys, updates, write_updates, lambda e: e is None)
        finally:
            await watcher.stop()

    return Scenario(
        f"watch {keys:,} keys + {updates:,} updates",
        keys + updates,
        {"kvstore watch()": ours, "nats-py kv.watchall()": peer},
        baseline="kvstore watch()",
    )


async def _drain(
    watcher: AsyncIterator[object],
    keys: int,
    updates: int,
    write: Callable[[], Awaitable[None]],
    is_marker: Callable[[object], bool],
) -> None:
    """Take the snapshot, then start the writer and take every update."""
    seen = 0
    writer: asyncio.Task[None] | None = None
    async for entry in watcher:
        if is_marker(entry):
            continue
        seen += 1
        if seen == keys:
            writer = asyncio.create_task(write())
        if seen == keys + updates:
            break
    assert writer is not None
    await writer
