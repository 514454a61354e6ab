"""A lease survives a server restart when its renewal resumes within the TTL, and is lost
otherwise: never held by two clients at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import jetstream
import kvstore


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[jetstream.EmbeddedServer]:
    with jetstream.EmbeddedServer(store_dir=tmp_path / "store") as running:
        yield running


async def _connect(server: jetstream.EmbeddedServer) -> jetstream.JetStream:
    return await jetstream.connect(
        server.url, timeout=1.0, reconnect_time_wait=0.1, max_reconnect_attempts=-1
    )


async def test_a_lease_renewed_within_its_ttl_survives_a_restart(
    server: jetstream.EmbeddedServer,
) -> None:
    async with await _connect(server) as js, await _connect(server) as other:
        bucket = await kvstore.create_bucket(js, "locks", history=5, marker_ttl="1s")
        rival = await kvstore.open_bucket(other, "locks")
        async with bucket.lock("jobs.nightly", ttl=10) as lease:
            await asyncio.to_thread(server.kill)
            await asyncio.to_thread(server.start)
            renewed = lease.revision
            while lease.revision == renewed:  # until a renewal went through the new server
                await asyncio.sleep(0.1)
            assert lease.held
            with pytest.raises(kvstore.LockTimeoutError):
                async with rival.lock("jobs.nightly", ttl=10, timeout=0):
                    pass
            await bucket.put("report", b"after the restart", fence=lease)
        assert (await bucket.get("report")).value == b"after the restart"


async def test_a_lease_the_server_outlived_down_is_lost_and_taken_by_the_next(
    server: jetstream.EmbeddedServer,
) -> None:
    async with await _connect(server) as js, await _connect(server) as other:
        bucket = await kvstore.create_bucket(js, "locks", history=5, marker_ttl="1s")
        rival = await kvstore.open_bucket(other, "locks")
        async with bucket.lock("jobs.nightly", ttl=3) as lease:
            await asyncio.to_thread(server.kill)
            await asyncio.wait_for(lease.wait_lost(), 10)  # the client's clock: maybe lost
            assert not lease.held
            await asyncio.to_thread(server.start)
            async with rival.lock("jobs.nightly", ttl=3, timeout=30) as taken:
                assert taken.token > lease.token
                with pytest.raises(kvstore.LeaseLostError):
                    await bucket.put("report", b"stale", fence=lease)
                await rival.put("report", b"fresh", fence=taken)
        assert (await bucket.get("report")).value == b"fresh"
