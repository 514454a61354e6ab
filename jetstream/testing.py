"""Harnesses for tests against real nats-servers on loopback (public: ``jetstream.testing``).

::

    from jetstream.testing import EmbeddedCluster

    with EmbeddedCluster(3) as cluster:                  # three JetStream nodes, free ports
        async with await cluster.connect() as js:
            node = await cluster.leader_of(js, "ORDERS")
            cluster.nodes[node].kill()                   # or pause(), restart(); partition()

``EmbeddedServer`` (one server, also exported by :mod:`jetstream`) and ``EmbeddedCluster`` run
the ``nats-server`` binary that :func:`find_server_binary` finds; :func:`lease_port` hands out
loopback ports nothing else takes while leased; a :class:`Link` is a TCP forwarder between two
nodes that a test can cut and restore (a network partition).
"""

from __future__ import annotations

from ._embedded.cluster import EmbeddedCluster
from ._embedded.links import Link
from ._embedded.ports import PortLease, lease_port
from ._embedded.server import EmbeddedServer, find_server_binary

__all__ = [
    "EmbeddedCluster",
    "EmbeddedServer",
    "Link",
    "PortLease",
    "find_server_binary",
    "lease_port",
]
