"""Many clients lose the same server at once: after a kill -9 and restart every watch resumes,
gap-free, without a reset loop (the re-create backoff is jittered)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import jetstream
import kvstore
from tests.faults.conftest import until

pytestmark = pytest.mark.faults

CLIENTS = 40
WRITES_AFTER = 20


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[jetstream.EmbeddedServer]:
    with jetstream.EmbeddedServer(store_dir=tmp_path / "store") as server:
        yield server


async def test_every_watch_resumes_after_the_server_comes_back(
    server: jetstream.EmbeddedServer,
) -> None:
    options = {"timeout": 2.0, "reconnect_time_wait": 0.2, "max_reconnect_attempts": -1}
    async with contextlib.AsyncExitStack() as stack:
        writer = await stack.enter_async_context(await jetstream.connect(server.url, **options))
        bucket = await kvstore.create_bucket(writer, "storm", history=64)
        first = await bucket.put("k", b"0")
        seen: list[list[int]] = [[] for _ in range(CLIENTS)]
        watchers: list[kvstore.KeyWatcher] = []
        for i in range(CLIENTS):
            js = await stack.enter_async_context(await jetstream.connect(server.url, **options))
            watcher = await stack.enter_async_context(
                (await kvstore.open_bucket(js, "storm")).watch()
            )
            watchers.append(watcher)
            stack.push_async_callback(_cancel, asyncio.create_task(_collect(watcher, seen[i])))

        await until(lambda: all(s == [first] for s in seen), "every watch has the value")
        await asyncio.to_thread(server.kill)
        await asyncio.sleep(0.5)
        await asyncio.to_thread(server.start)
        last = first
        for n in range(1, WRITES_AFTER + 1):
            last = await bucket.put("k", str(n).encode())

        await until(lambda: all(s[-1] == last for s in seen), "every watch resumed")
        for revisions in seen:
            assert revisions == list(range(first, last + 1)), "gap-free, in order, each once"
        assert max(w.resets for w in watchers) <= 5, [w.resets for w in watchers]


async def _collect(watcher: kvstore.KeyWatcher, into: list[int]) -> None:
    async for entry in watcher:
        into.append(entry.revision)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
