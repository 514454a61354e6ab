"""A lease on an R3 bucket whose stream leader is killed: renewed through the new leader when
the election ends within the TTL, lost otherwise; never held by two clients at once."""

from __future__ import annotations

import asyncio

import pytest

import kvstore
from jetstream.testing import EmbeddedCluster
from tests.faults.conftest import kill_leader, restart

pytestmark = pytest.mark.faults


async def test_a_lease_outlives_a_stream_leader_kill_or_is_lost_but_never_held_twice(
    cluster: EmbeddedCluster,
) -> None:
    async with await cluster.connect(timeout=2.0) as js, await cluster.connect() as other:
        bucket = await kvstore.create_bucket(js, "leases", replicas=3, history=5, marker_ttl="1s")
        rival = await kvstore.open_bucket(other, "leases")
        async with bucket.lock("jobs.nightly", ttl=10) as lease:
            killed = await kill_leader(cluster, js, bucket.stream)
            renewed = lease.revision
            while lease.held and lease.revision == renewed:  # a renewal, or the loss
                await asyncio.sleep(0.1)
            if lease.held:  # renewed through the new leader: nobody else gets it
                with pytest.raises(kvstore.LockTimeoutError):
                    async with rival.lock("jobs.nightly", ttl=10, timeout=0):
                        pass
                await bucket.put("report", b"holder", fence=lease)
                expected = b"holder"
            else:
                async with rival.lock("jobs.nightly", ttl=10, timeout=30) as taken:
                    with pytest.raises(kvstore.LeaseLostError):
                        await bucket.put("report", b"stale", fence=lease)
                    await rival.put("report", b"rival", fence=taken)
                expected = b"rival"
        await restart(cluster, killed)
        assert (await bucket.get("report")).value == expected
