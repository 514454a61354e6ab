"""Multi-key writes and per-key TTL on a 3-node cluster while a follower dies or freezes, the
leader freezes past an election, or the whole cluster restarts (see docs/RELIABILITY.md)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

import jetstream
import kvstore
from jetstream.testing import EmbeddedCluster
from kvstore import Op
from kvstore._models import op_from_headers
from tests.faults.conftest import (
    assert_records_all_or_nothing,
    fault_for,
    kill_leader,
    replicas_agree,
    restart,
    writes_during,
)

pytestmark = pytest.mark.faults

KEYS = 10


async def _follower_of(cluster: EmbeddedCluster, js: jetstream.JetStream, stream: str) -> int:
    leader = await cluster.leader_of(js, stream)
    return next(i for i, node in enumerate(cluster.nodes) if i != leader and node.running)


async def test_follower_killed_during_put_many(cluster: EmbeddedCluster) -> None:
    """A follower's kill -9 and restart cost no record: quorum remains, so every put_many
    succeeds, whole, on every replica."""
    async with await cluster.connect(timeout=2.0) as js:
        bucket = await kvstore.create_bucket(js, "fkill", replicas=3)
        follower = await _follower_of(cluster, js, bucket.stream)

        async def kill_and_restart() -> None:
            await asyncio.to_thread(cluster.nodes[follower].kill)
            await asyncio.sleep(2)
            await restart(cluster, follower)

        outcomes = await writes_during([bucket], kill_and_restart, KEYS)
        assert len(outcomes) >= 3
        failed = {n: o for n, o in outcomes.items() if not isinstance(o, dict)}
        assert not failed, f"a follower loss failed writes: {failed}"
        await assert_records_all_or_nothing(cluster, js, bucket, outcomes, KEYS)


async def test_follower_frozen_during_put_many(cluster: EmbeddedCluster) -> None:
    """SIGSTOP on a follower for 3 s (a stalled disk or VM): every put_many succeeds; the
    follower catches up once resumed."""
    async with await cluster.connect(timeout=2.0) as js:
        bucket = await kvstore.create_bucket(js, "ffreeze", replicas=3)
        node = cluster.nodes[await _follower_of(cluster, js, bucket.stream)]
        outcomes = await writes_during([bucket], fault_for(3, node.pause, node.resume), KEYS)
        failed = {n: o for n, o in outcomes.items() if not isinstance(o, dict)}
        assert not failed, f"a frozen follower failed writes: {failed}"
        await assert_records_all_or_nothing(cluster, js, bucket, outcomes, KEYS)


async def test_leader_frozen_past_an_election(cluster: EmbeddedCluster) -> None:
    """SIGSTOP on the leader for 8 s: the others elect a new leader, then the old one wakes up
    believing it leads. Every record is whole or absent, outcomes definite."""
    async with await cluster.connect(timeout=2.0) as js:
        bucket = await kvstore.create_bucket(js, "lfreeze", replicas=3)
        node = cluster.nodes[await cluster.leader_of(js, bucket.stream)]
        outcomes = await writes_during([bucket], fault_for(8, node.pause, node.resume), KEYS)
        assert any(isinstance(o, dict) for o in outcomes.values())
        await assert_records_all_or_nothing(cluster, js, bucket, outcomes, KEYS)


async def _expired_within(bucket: kvstore.Bucket, key: str, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        try:
            await bucket.get(key)
        except kvstore.KeyNotFoundError:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{key!r} still there after {seconds}s")


async def test_ttl_expires_across_a_leader_kill(cluster: EmbeddedCluster) -> None:
    """A key's TTL is kept by the new leader: it expires (its marker reaches a watcher once)
    while a longer-lived key stays."""
    async with await cluster.connect(timeout=2.0) as js:
        bucket = await kvstore.create_bucket(
            js, "ttlkill", replicas=3, marker_ttl=timedelta(seconds=30)
        )
        ops: list[tuple[str, Op]] = []

        async def watch() -> None:
            async with bucket.watch(updates_only=True) as watcher:
                async for entry in watcher:
                    ops.append((entry.key, entry.op))

        watching = asyncio.create_task(watch())
        await asyncio.sleep(0.2)
        await bucket.put("short", b"v", ttl=3)
        await bucket.put("long", b"v", ttl=300)
        leader = await kill_leader(cluster, js, bucket.stream)
        await _expired_within(bucket, "short", 3 + 20)
        assert (await bucket.get("long")).value == b"v"
        await restart(cluster, leader)
        await replicas_agree(cluster, bucket.stream)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while ("short", Op.EXPIRED) not in ops and loop.time() < deadline:
            await asyncio.sleep(0.1)
        watching.cancel()
        assert ops.count(("short", Op.EXPIRED)) == 1, ops
        assert ("long", Op.EXPIRED) not in ops


async def test_ttl_expires_across_a_full_restart(cluster: EmbeddedCluster) -> None:
    """Stopping every node does not lose or reset a key's TTL."""
    async with await cluster.connect(timeout=2.0) as js:
        bucket = await kvstore.create_bucket(
            js, "ttlrestart", replicas=3, marker_ttl=timedelta(seconds=30)
        )
        await bucket.put("short", b"v", ttl=4)
        await bucket.put("long", b"v", ttl=300)
        loop = asyncio.get_running_loop()
        written = loop.time()
        for node in cluster.nodes:
            await asyncio.to_thread(node.stop)
        await asyncio.to_thread(cluster.start)
        await _expired_within(bucket, "short", 4 + 20)
        assert loop.time() - written >= 3.5, "not expired before its TTL"
        assert (await bucket.get("long")).value == b"v"
        last = await js.get_last_message(bucket.stream, "$KV.ttlrestart.short", direct=False)
        assert op_from_headers(last.headers) is Op.EXPIRED


async def test_reads_ride_out_a_leader_kill(cluster: EmbeddedCluster) -> None:
    """``get`` and ``get_many`` on a connection to the stream leader, right after its kill -9:
    a read that times out while the client reconnects elsewhere is asked again, instead of
    failing (a direct get did, in CI: ``test_ttl_expires_across_a_leader_kill``)."""
    async with await cluster.connect(timeout=1.0) as js:
        bucket = await kvstore.create_bucket(js, "readkill", replicas=3)
        values = {f"k.{i}": b"v%d" % i for i in range(200)}
        await bucket.put_many(values)
        leader = await cluster.leader_of(js, bucket.stream)
        urls = [cluster.nodes[leader].url] + [
            node.url for i, node in enumerate(cluster.nodes) if i != leader
        ]
        async with await jetstream.connect(
            urls, timeout=0.5, dont_randomize=True, reconnect_time_wait=1.0
        ) as reader:
            on_leader = await kvstore.open_bucket(reader, "readkill")
            await asyncio.to_thread(cluster.nodes[leader].kill)
            for _ in range(3):
                snapshot = await on_leader.get_many(values)
                assert {k: e.value for k, e in snapshot.items()} == values
                assert (await on_leader.get("k.7")).value == b"v7"
        await restart(cluster, leader)
