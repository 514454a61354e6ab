"""put_many and get_many vs nats-py's built-in KV, and vs a hand-written atomic batch."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

import nats
import nats.js.errors
from nats.js.kv import KeyValue

import jetstream
import kvstore

from ._harness import Scenario

VALUE = b"v" * 100


@dataclass
class Clients:
    js: jetstream.JetStream
    bucket: kvstore.Bucket
    peer_kv: KeyValue


@asynccontextmanager
async def clients(url: str, replicas: int = 1) -> AsyncIterator[Clients]:
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.create_bucket(js, "bench_atomic", replicas=replicas)
        peer = await nats.connect(url)
        try:
            yield Clients(js, bucket, await peer.jetstream().key_value("bench_atomic"))
        finally:
            await peer.close()
            await kvstore.delete_bucket(js, "bench_atomic")


def put_many_scenario(c: Clients, n: int) -> Scenario:
    records = {f"rec.k{i}": VALUE for i in range(n)}

    async def ours() -> None:
        await c.bucket.put_many(records)

    async def sequential() -> None:
        for key, value in records.items():
            await c.peer_kv.put(key, value)

    async def gathered() -> None:
        await asyncio.gather(*(c.peer_kv.put(k, v) for k, v in records.items()))

    async def ceiling() -> None:
        await hand_written_batch(c.js, "$KV.bench_atomic.rec.k", n)

    return Scenario(
        f"put {n} keys",
        n,
        {
            "kvstore put_many (atomic)": ours,
            "nats-py kv.put sequential": sequential,
            "nats-py kv.put gathered": gathered,
            "hand-written atomic batch (ceiling)": ceiling,
        },
        baseline="kvstore put_many (atomic)",
    )


async def hand_written_batch(js: jetstream.JetStream, prefix: str, n: int) -> None:
    """The least an atomic batch can cost: no validation, ids or resolution."""
    batch_id = jetstream.AtomicBatch(js).batch_id
    nc = js.nc
    for seq in range(1, n + 1):
        headers = {"Nats-Batch-Id": batch_id, "Nats-Batch-Sequence": str(seq)}
        if seq == 1 and n > 1:
            await nc.request(f"{prefix}{seq - 1}", VALUE, headers=headers)
        elif seq < n:
            await nc.publish(f"{prefix}{seq - 1}", VALUE, headers=headers)
        else:
            headers["Nats-Batch-Commit"] = "1"
            reply = await nc.request(f"{prefix}{seq - 1}", VALUE, headers=headers)
            assert b'"count"' in reply.data, reply.data


def get_many_scenario(c: Clients, n: int) -> Scenario:
    keys = [f"rec.k{i}" for i in range(n)]

    async def ours() -> None:
        snap = await c.bucket.get_many(keys)
        assert len(snap) == n

    async def sequential() -> None:
        for key in keys:
            await c.peer_kv.get(key)

    async def gathered() -> None:
        await asyncio.gather(*(c.peer_kv.get(key) for key in keys))

    return Scenario(
        f"get {n} keys",
        n,
        {
            "kvstore get_many (one point in time)": ours,
            "nats-py kv.get sequential": sequential,
            "nats-py kv.get gathered": gathered,
        },
        baseline="kvstore get_many (one point in time)",
    )


def cas_scenario(c: Clients, n: int) -> Scenario:
    """Compare-and-set: accepted and refused writes side by side (optimistic-concurrency loops
    such as locks and counters live on the refused path)."""
    fresh = itertools.count()
    revision = 0

    async def setup() -> None:
        nonlocal revision
        revision = await c.bucket.put("cas.counter", VALUE)
        await c.bucket.put("cas.taken", VALUE)

    async def update_accepted() -> None:
        nonlocal revision
        if not revision:
            await setup()
        for _ in range(n):
            revision = await c.bucket.update("cas.counter", VALUE, revision)

    async def update_refused() -> None:
        for _ in range(n):
            with suppress(kvstore.WrongRevisionError):
                await c.bucket.update("cas.taken", VALUE, 1)

    async def create_accepted() -> None:
        round_no = next(fresh)
        for i in range(n):
            await c.bucket.create(f"cas.new.{round_no}.{i}", VALUE)

    async def create_refused() -> None:
        for _ in range(n):
            with suppress(kvstore.KeyExistsError):
                await c.bucket.create("cas.taken", VALUE)

    async def peer_update_refused() -> None:
        for _ in range(n):
            with suppress(nats.js.errors.KeyWrongLastSequenceError):
                await c.peer_kv.update("cas.taken", VALUE, last=1)

    return Scenario(
        f"CAS {n} writes",
        n,
        {
            "kvstore update accepted": update_accepted,
            "kvstore update refused": update_refused,
            "kvstore create accepted": create_accepted,
            "kvstore create refused": create_refused,
            "nats-py kv.update refused": peer_update_refused,
        },
        baseline="kvstore update accepted",
        unit="writes",
    )
