"""Network partitions between servers (routes cut, clients still connected to every node):
writes on both sides stay all-or-nothing, and a watch on the minority side catches up."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

import jetstream
import kvstore
from jetstream.testing import EmbeddedCluster
from tests.faults.conftest import (
    assert_records_all_or_nothing,
    fault_for,
    replicas_agree,
    until,
    writes_during,
)

pytestmark = pytest.mark.faults

KEYS = 10
PARTITION_SECONDS = 8  # longer than an election


@pytest.fixture(scope="module")
def whole_cluster() -> Iterator[EmbeddedCluster]:
    """This module's cluster routes through links that partition() can cut."""
    with EmbeddedCluster(3, partitionable=True) as nodes:
        yield nodes


async def _create_when_placeable(
    js: jetstream.JetStream, name: str, **options: object
) -> kvstore.Bucket:
    """An R3 bucket. Right after a heal the meta leader may still count the rejoined node as
    offline for a few seconds (10005 "no suitable peers for placement, peer offline")."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while True:
        try:
            return await kvstore.create_bucket(js, name, replicas=3, **options)  # type: ignore[arg-type]
        except jetstream.ServerError as exc:
            if exc.err_code != 10005 or loop.time() > deadline:
                raise
            await asyncio.sleep(0.5)


async def test_writes_on_both_sides_of_a_partition(cluster: EmbeddedCluster) -> None:
    """The leader is cut off from the others for 8 s while one client writes through it and
    another through the majority: the majority side keeps writing, the minority side's write
    waits for the heal, and every call returns revisions that are whole on every replica."""
    async with await cluster.connect(timeout=2.0) as admin:
        bucket = await _create_when_placeable(admin, "split")
        leader = await cluster.leader_of(admin, bucket.stream)
    others = [node.url for i, node in enumerate(cluster.nodes) if i != leader]
    options = {"timeout": 2.0, "reconnect_time_wait": 0.2, "max_reconnect_attempts": -1}
    async with (
        await jetstream.connect(cluster.nodes[leader].url, **options) as minority,
        await jetstream.connect(others, **options) as majority,
    ):
        buckets = [await kvstore.open_bucket(js, "split") for js in (minority, majority)]
        cut_off = fault_for(PARTITION_SECONDS, lambda: cluster.partition({leader}), cluster.heal)
        outcomes = await writes_during(buckets, cut_off, KEYS)
        await assert_records_all_or_nothing(cluster, majority, buckets[1], outcomes, KEYS)
    failed = {n: o for n, o in outcomes.items() if not isinstance(o, dict)}
    assert not failed, f"a partition shorter than the deadline failed writes: {failed}"
    assert len([n for n in outcomes if n % 2 == 1]) >= 3, "the majority side kept writing"


async def test_watch_on_the_minority_side_catches_up(cluster: EmbeddedCluster) -> None:
    """A watcher connected to a node that is cut off sees nothing new during the partition and
    every revision, in order and once, after it heals."""
    async with await cluster.connect(timeout=2.0) as admin:
        bucket = await _create_when_placeable(admin, "minority", history=64)
        await bucket.put("k", b"0")
        isolated = (await cluster.leader_of(admin, bucket.stream) + 1) % len(cluster.nodes)
        others = [node.url for i, node in enumerate(cluster.nodes) if i != isolated]
        async with (
            await jetstream.connect(cluster.nodes[isolated].url, timeout=2.0) as cut_off,
            await jetstream.connect(others, timeout=2.0) as writer,
        ):
            seen: list[int] = []

            async def watch() -> None:
                async with (await kvstore.open_bucket(cut_off, "minority")).watch() as watcher:
                    async for entry in watcher:
                        seen.append(entry.revision)

            watching = asyncio.create_task(watch())
            written = [1]
            await until(lambda: seen == written, "the watch has the current value")
            cluster.partition({isolated})
            try:
                target = await kvstore.open_bucket(writer, "minority")
                for n in range(1, 31):
                    written.append(await target.put("k", str(n).encode()))
                await asyncio.sleep(1)
            finally:
                cluster.heal()
            await until(lambda: seen[-1] == written[-1], "the watch caught up", within=60)
            watching.cancel()
            assert seen == written, "after the heal: every revision, in order, once"
        await replicas_agree(cluster, bucket.stream)
