"""Watching a bucket: an initial snapshot of many keys, then a stream of updates, vs nats-py's
``kv.watchall()``. Both watchers face the same writer, a separate process writing with
``put_many`` in batches of 1000."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
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


class Writer:
    """The update writer in its own process (see ``_writer``)."""

    def __init__(self, url: str, updates: int) -> None:
        self._args = [sys.executable, "-m", "benchmarks._writer", url, BUCKET, str(updates)]
        self._proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            *self._args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )

    async def go(self) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(b"go\n")
        await self._proc.stdin.drain()

    async def wait_done(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        line = await self._proc.stdout.readline()
        assert line.strip() == b"done", line

    async def close(self) -> None:
        if self._proc is not None and self._proc.stdin is not None:
            self._proc.stdin.close()
            await self._proc.wait()


def watch_scenario(
    bucket: kvstore.Bucket, peer_kv: KeyValue, writer: Writer, keys: int, updates: int
) -> Scenario:
    async def ours() -> None:
        async with bucket.watch() as watcher:
            await _drain(watcher, keys, updates, writer, lambda e: False)

    async def peer() -> None:
        watcher = await peer_kv.watchall()
        try:
            await _drain(watcher, keys, updates, writer, lambda e: e is None)
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
    writer: Writer,
    is_marker: Callable[[object], bool],
) -> None:
    """Take the snapshot, then let the writer go and take every update."""
    seen = 0
    async for entry in watcher:
        if is_marker(entry):
            continue
        seen += 1
        if seen == keys:
            await writer.go()
        if seen == keys + updates:
            break
    await writer.wait_done()
