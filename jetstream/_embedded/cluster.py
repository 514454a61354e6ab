"""EmbeddedCluster: a JetStream cluster of nats-servers on loopback, for fault tests.

Each node is an :class:`EmbeddedServer` with its own client, route and monitoring ports and its
own store directory, so nodes can be killed (-9), paused and restarted one by one.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Self

from .._connect import connect
from .._context import JetStream
from .._errors import JetStreamError
from .links import Link
from .ports import lease_port
from .server import EmbeddedServer, ServerProcesses

__all__ = ["EmbeddedCluster"]


class EmbeddedCluster(ServerProcesses):
    """``size`` nats-servers (default 3) forming JetStream cluster ``name``, on 127.0.0.1.

    ``urls`` lists every node's client URL (give all of them to ``connect`` so a client fails
    over). Use as a (async) context manager or call :meth:`start` / :meth:`close`. With
    ``partitionable=True`` the routes between nodes pass through loopback links that
    :meth:`partition` cuts and :meth:`heal` restores (a network partition between servers).
    """

    def __init__(
        self,
        size: int = 3,
        *,
        name: str = "jetstore",
        store_dir: Path | None = None,
        partitionable: bool = False,
    ) -> None:
        if size < 1:
            raise ValueError("a cluster needs at least one node")
        self.name = name
        self._temporary_root = store_dir is None
        self._root = store_dir or Path(tempfile.mkdtemp(prefix="jetstore-cluster-"))
        # Route and monitoring ports stay leased while the cluster object lives, closed or
        # not: a killed node must find them free when it restarts, as must a closed cluster
        # started again.
        self._leases = [lease_port() for _ in range(2 * size)]
        routes = [lease.port for lease in self._leases[:size]]
        self.monitor_ports = [lease.port for lease in self._leases[size:]]
        # With partitionable, node i reaches node j only through links[i, j] (see partition).
        self.links: dict[tuple[int, int], Link] = {}
        self._dead_ends: list[Link] = []
        if partitionable:
            self.links = {
                (i, j): Link(0, routes[j]) for i in range(size) for j in range(size) if i != j
            }
        self.nodes = [
            EmbeddedServer(
                store_dir=self._root / f"n{i}",
                extra_args=[
                    "--name",
                    f"n{i}",
                    "--cluster_name",
                    name,
                    "--cluster",
                    f"nats://127.0.0.1:{routes[i]}",
                    "-m",
                    str(self.monitor_ports[i]),
                    *self._route_args(i, routes),
                ],
            )
            for i in range(size)
        ]

    def _route_args(self, i: int, routes: list[int]) -> list[str]:
        if not self.links:
            return ["--routes", ",".join(f"nats://127.0.0.1:{port}" for port in routes)]
        # Gossip would let nodes route to each other directly, around the links: advertise a
        # port that refuses every connection instead of the real route port.
        dead_end = Link(0, routes[i])
        dead_end.cut()
        self._dead_ends.append(dead_end)
        mine = [link for (src, _), link in self.links.items() if src == i]
        return [
            "--routes",
            ",".join(f"nats://127.0.0.1:{link.port}" for link in mine),
            "--cluster_advertise",
            f"127.0.0.1:{dead_end.port}",
        ]

    def partition(self, *groups: set[int]) -> None:
        """Cut every route between nodes of different ``groups`` (nodes left out form one more
        group) and restore those within a group; clients still reach every node.

        Raises:
            JetStreamError: the cluster was not made with ``partitionable=True``.
            ValueError: a group names an unknown node, or a node is in two groups.
        """
        if not self.links:
            raise JetStreamError("partition() needs EmbeddedCluster(..., partitionable=True)")
        nodes = set(range(len(self.nodes)))
        named = [node for group in groups for node in group]
        if not set(named) <= nodes or len(named) != len(set(named)):
            raise ValueError(f"groups must be disjoint sets of node indexes 0..{len(nodes) - 1}")
        rest = nodes.difference(*groups)
        side = {node: n for n, group in enumerate([*groups, rest]) for node in group}
        for (i, j), link in self.links.items():
            if side[i] == side[j]:
                link.restore()
            else:
                link.cut()

    def heal(self) -> None:
        """Restore every route (the nodes reconnect on their own)."""
        for link in self.links.values():
            link.restore()

    @property
    def urls(self) -> list[str]:
        """Every node's client URL."""
        return [node.url for node in self.nodes]

    def start(self, *, timeout: float = 30.0) -> Self:
        """Start every node that is not running and wait until JetStream has a meta leader
        that sees every other node as current (so replicated streams can be placed).

        Raises:
            JetStreamError: a node did not start, or the cluster was not whole in ``timeout``.
        """
        for node in self.nodes:
            node.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._whole():
                return self
            time.sleep(0.1)
        raise JetStreamError(f"cluster {self.name!r}: not whole within {timeout:g}s")

    def _whole(self) -> bool:
        """Every node knows the meta leader, and the leader (the only node that tracks them)
        sees every other node as current and online (placement skips offline peers)."""
        metas = [self.jsz(i).get("meta_cluster", {}) for i in range(len(self.nodes))]
        leaders = {meta.get("leader") for meta in metas}
        if len(leaders) != 1 or None in leaders:
            return False
        leader = metas[int(str(leaders.pop())[1:])]
        peers = leader.get("replicas") or []
        return len(peers) == len(self.nodes) - 1 and all(
            p.get("current") and not p.get("offline") for p in peers
        )

    def close(self) -> None:
        """Stop every node (by pid) and remove the temporary store. The route and monitoring
        ports stay leased until the cluster object is garbage-collected."""
        for node in self.nodes:
            node.close()
        for link in [*self.links.values(), *self._dead_ends]:
            link.close()
        if self._temporary_root:
            shutil.rmtree(self._root, ignore_errors=True)

    def jsz(self, index: int, **params: str) -> dict[str, Any]:
        """A node's ``/jsz`` monitoring report (its own view: per-replica stream state)."""
        query = "&".join(f"{k}={v}" for k, v in params.items())
        url = f"http://127.0.0.1:{self.monitor_ports[index]}/jsz?{query}"
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                data: dict[str, Any] = json.load(reply)
                return data
        except OSError:
            return {}

    def stream_state(self, index: int, stream: str) -> dict[str, Any] | None:
        """The state of ``stream`` as node ``index`` holds it (None if it has no replica)."""
        report = self.jsz(index, streams="true")
        for account in report.get("account_details", []):
            for detail in account.get("stream_detail", []):
                if detail.get("name") == stream:
                    state: dict[str, Any] = detail.get("state", {})
                    return state
        return None

    async def leader_of(self, js: JetStream, stream: str) -> int:
        """The index of the node leading ``stream``.

        Raises:
            JetStreamError: the stream has no leader right now.
        """
        info = await js.stream_info(stream)
        leader = (info.cluster or {}).get("leader")
        for i, node in enumerate(self.nodes):
            if node.running and f"n{i}" == leader:
                return i
        raise JetStreamError(f"stream {stream!r} has no leader now ({leader!r})")

    async def connect(self, **options: Any) -> JetStream:
        """A context connected to every node (fails over between them).

        Raises:
            ConnectionFailedError: no node could be reached.
        """
        options.setdefault("reconnect_time_wait", 0.2)
        options.setdefault("max_reconnect_attempts", -1)
        return await connect(self.urls, **options)
