"""The embedded cluster's own failure: a node that cannot start takes the others down with it."""

from __future__ import annotations

import asyncio
import socket

import pytest

import jetstream
from jetstream._embedded.ports import _lock, _lock_directory
from jetstream.testing import EmbeddedCluster


def _try_lock(port: int) -> int | None:
    """``port``'s lock file descriptor, or None while a lease holds the port."""
    return _lock(port, _lock_directory())


def test_a_cluster_that_fails_to_start_leaves_no_node_running() -> None:
    cluster = EmbeddedCluster(3)
    # Something else listens on node 1's monitoring port: node 1 exits at start.
    blocker = socket.create_server(("127.0.0.1", cluster.monitor_ports[1]))
    try:
        try:
            with cluster:
                raise AssertionError("node 1 cannot have started")
        except jetstream.JetStreamError as error:
            assert "address already in use" in str(error)
        assert [node.running for node in cluster.nodes] == [False, False, False]
    finally:
        blocker.close()


async def test_a_cancelled_async_start_leaves_no_node_running() -> None:
    cluster = EmbeddedCluster(3)

    async def use() -> None:
        async with cluster:
            raise AssertionError("the start was cancelled")

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(use(), 0.1)
    assert [node.running for node in cluster.nodes] == [False, False, False]


def test_a_closed_cluster_starts_again_on_its_leased_ports() -> None:
    cluster = EmbeddedCluster(3)
    with cluster:
        pass
    with cluster:
        assert cluster.jsz(0), "monitoring answers"
        assert _try_lock(cluster.monitor_ports[0]) is None, "still leased to the cluster"
    assert not any(node.running for node in cluster.nodes)
