"""The blocking client (kvstore.sync) vs the async API it drives, doing the same work.

Each blocking call hands its work to the client's loop thread and waits for the result: the
cost is that hand-over, which matters for one-key calls and not for put_many or a watch
(whose entries the loop reads ahead). Goals: a single put or get at most 1.3x the async call;
put_many and watch throughput the same. The blocking variants run on the benchmark's own
thread, blocking its loop while they run (nothing else runs then).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import jetstream
import jetstream.sync
import kvstore
import kvstore.sync

from ._harness import Scenario

VALUE = b"v" * 100
ASYNC = "kvstore (async)"
BLOCKING = "kvstore.sync (blocking)"


@dataclass
class Twins:
    bucket: kvstore.Bucket
    blocking: kvstore.sync.Bucket


@asynccontextmanager
async def twins(url: str, name: str) -> AsyncIterator[Twins]:
    """One bucket, opened by the async API and by the blocking client."""
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.create_bucket(js, name)
        with jetstream.sync.connect(url) as sync_js:
            try:
                yield Twins(bucket, kvstore.sync.open_bucket(sync_js, name))
            finally:
                await kvstore.delete_bucket(js, name)


def put_scenario(t: Twins, n: int) -> Scenario:
    async def aio() -> None:
        for i in range(n):
            await t.bucket.put(f"one.k{i}", VALUE)

    async def blocking() -> None:
        for i in range(n):
            t.blocking.put(f"one.k{i}", VALUE)

    return Scenario(
        f"blocking client: {n} single puts",
        n,
        {ASYNC: aio, BLOCKING: blocking},
        baseline=ASYNC,
        unit="puts",
    )


def get_scenario(t: Twins, n: int) -> Scenario:
    async def aio() -> None:
        for i in range(n):
            await t.bucket.get(f"one.k{i}")

    async def blocking() -> None:
        for i in range(n):
            t.blocking.get(f"one.k{i}")

    return Scenario(
        f"blocking client: {n} single gets",
        n,
        {ASYNC: aio, BLOCKING: blocking},
        baseline=ASYNC,
        unit="gets",
    )


def put_many_scenario(t: Twins, n: int) -> Scenario:
    records = {f"many.k{i}": VALUE for i in range(n)}

    async def aio() -> None:
        await t.bucket.put_many(records)

    async def blocking() -> None:
        t.blocking.put_many(records)

    return Scenario(
        f"blocking client: put_many {n} keys", n, {ASYNC: aio, BLOCKING: blocking}, ASYNC
    )


def watch_scenario(t: Twins, n: int) -> Scenario:
    """The snapshot of ``n`` keys (written first by :func:`fill`), read by a watch."""

    async def aio() -> None:
        seen = 0
        async with t.bucket.watch("snap.>") as watcher:
            async for _ in watcher.initial():
                seen += 1
        assert seen == n, seen

    async def blocking() -> None:
        with t.blocking.watch("snap.>") as watcher:
            seen = sum(1 for _ in watcher.initial())
        assert seen == n, seen

    return Scenario(
        f"blocking client: watch a {n}-key snapshot", n, {ASYNC: aio, BLOCKING: blocking}, ASYNC
    )


async def fill(t: Twins, n: int) -> None:
    for start in range(0, n, 1000):
        await t.bucket.put_many({f"snap.k{i}": VALUE for i in range(start, min(n, start + 1000))})


async def measure(url: str, ops: int, watch_keys: int, rounds: int) -> list[Scenario]:
    """Every blocking-client scenario, each run ``rounds`` times (interleaved)."""
    async with twins(url, "bench_sync") as t:
        scenarios = [put_scenario(t, ops), get_scenario(t, ops), put_many_scenario(t, 1000)]
        await fill(t, watch_keys)
        scenarios.append(watch_scenario(t, watch_keys))
        for scenario in scenarios:
            await scenario.run(rounds)
    return scenarios
