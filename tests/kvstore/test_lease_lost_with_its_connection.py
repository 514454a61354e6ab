"""A lease whose connection is closed while it is held is lost at its next renewal (nothing
can renew it any more), not retried with a warning every quarter second until its TTL runs
out; leaving the block raises nothing."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

import jetstream
import kvstore


async def test_a_lease_is_lost_with_its_connection(
    nats_server: jetstream.EmbeddedServer,
    js: jetstream.JetStream,
    unique_name: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="kvstore")
    closing = await jetstream.connect(nats_server.url)
    bucket = await kvstore.create_bucket(closing, unique_name("kv"), marker_ttl="1s")
    try:
        async with bucket.lock("jobs.nightly", ttl=3) as lease:
            await closing.close()
            await asyncio.wait_for(lease.wait_lost(), 10)  # the next renewal (within 1 s)
            with pytest.raises(kvstore.LeaseLostError, match="closed"):
                await bucket.put("report", b"late", fence=lease)
            assert "within its TTL" not in repr(lease)
        assert not [r for r in caplog.records if "retrying" in r.getMessage()]
    finally:
        await kvstore.delete_bucket(js, bucket.name)
