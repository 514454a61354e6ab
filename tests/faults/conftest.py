"""A 3-node JetStream cluster on loopback per test module (own ports and store dirs, nodes
stopped by pid), with helpers to kill the stream leader and bring a node back."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

import jetstream


@pytest.fixture(scope="module")
def whole_cluster() -> Iterator[jetstream.EmbeddedCluster]:
    with jetstream.EmbeddedCluster(3) as nodes:
        yield nodes


@pytest.fixture
def cluster(whole_cluster: jetstream.EmbeddedCluster) -> jetstream.EmbeddedCluster:
    """The module's cluster, with every node running and current before each test."""
    return whole_cluster.start()


async def kill_leader(
    cluster: jetstream.EmbeddedCluster, js: jetstream.JetStream, stream: str
) -> int:
    """kill -9 the node leading ``stream``; return its index."""
    leader = await cluster.leader_of(js, stream)
    await asyncio.to_thread(cluster.nodes[leader].kill)
    return leader


async def restart(cluster: jetstream.EmbeddedCluster, index: int) -> None:
    await asyncio.to_thread(cluster.nodes[index].start)


async def replicas_agree(
    cluster: jetstream.EmbeddedCluster, stream: str, timeout: float = 30
) -> dict[str, object]:
    """Wait until every node holds the same state of ``stream``; return it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        states = [cluster.stream_state(i, stream) for i in range(len(cluster.nodes))]
        keys = {(s or {}).get("last_seq"): s for s in states}
        if (
            None not in states
            and len(keys) == 1
            and len({(s or {}).get("messages") for s in states}) == 1
        ):
            return states[0] or {}
        assert loop.time() < deadline, f"replicas disagree: {states}"
        await asyncio.sleep(0.2)
