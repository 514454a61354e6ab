"""A lease whose bucket is deleted while it is held is lost: its next renewal says so, fenced
writes raise, and leaving the block raises nothing (there is nothing left to release)."""

from __future__ import annotations

import asyncio

import pytest

import jetstream
import kvstore
from tests.conftest import BucketFactory


async def test_a_lease_is_lost_with_its_bucket(
    js: jetstream.JetStream, make_bucket: BucketFactory
) -> None:
    bucket = await make_bucket(history=5, marker_ttl="1s")
    async with bucket.lock("jobs.nightly", ttl=3) as lease:
        await kvstore.delete_bucket(js, bucket.name)
        await asyncio.wait_for(lease.wait_lost(), 10)  # the next renewal (within 1 s) fails
        assert not lease.held
        with pytest.raises(kvstore.LeaseLostError, match="renewal refused"):
            await bucket.put("report", b"late", fence=lease)
