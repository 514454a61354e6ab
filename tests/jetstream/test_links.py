"""The loopback link EmbeddedCluster partitions with: forwards, cuts, refuses, restores."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

import jetstream
from jetstream._embedded.links import Link
from jetstream.testing import EmbeddedCluster


@pytest.fixture
def echo_port() -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(1024):
                    conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()


def _echo(port: int, payload: bytes) -> bytes:
    """What comes back through ``port``: b"" when the connection is closed (or reset)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
            conn.sendall(payload)
            return conn.recv(1024)
    except ConnectionError:
        return b""


def test_a_link_forwards_until_cut_and_again_once_restored(echo_port: int) -> None:
    link = Link(0, echo_port)
    try:
        assert _echo(link.port, b"ping") == b"ping"
        with socket.create_connection(("127.0.0.1", link.port), timeout=2) as open_conn:
            assert (open_conn.sendall(b"a"), open_conn.recv(1))[1] == b"a"
            link.cut()
            assert open_conn.recv(1) == b"", "open connections are closed"
        assert not link.up
        assert _echo(link.port, b"refused") == b"", "new connections are refused"
        link.restore()
        assert _echo(link.port, b"back") == b"back"
    finally:
        link.close()


def test_partition_refuses_unknown_or_overlapping_groups() -> None:
    cluster = EmbeddedCluster(3, partitionable=True)  # nodes not started
    try:
        for groups in ([{3}], [{0}, {0, 1}], [{-1}]):
            with pytest.raises(ValueError, match="disjoint"):
                cluster.partition(*groups)
        assert all(link.up for link in cluster.links.values()), "nothing was cut"
        cluster.partition({0})
        assert not cluster.links[0, 1].up and cluster.links[1, 2].up
    finally:
        cluster.close()
    plain = EmbeddedCluster(3)
    try:
        with pytest.raises(jetstream.JetStreamError, match="partitionable"):
            plain.partition({0})
    finally:
        plain.close()
