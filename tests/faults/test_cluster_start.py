"""The embedded cluster's own failure: a node that cannot start takes the others down with it."""

from __future__ import annotations

import socket

import jetstream


def test_a_cluster_that_fails_to_start_leaves_no_node_running() -> None:
    cluster = jetstream.EmbeddedCluster(3)
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
