"""A lock entry cancelled while waiting holds nothing and leaves no watch behind; a block
cancelled while holding releases the lock at once."""

from __future__ import annotations

import asyncio

import pytest

import jetstream
import kvstore


async def _consumers(js: jetstream.JetStream, bucket: kvstore.Bucket) -> int:
    return (await js.stream_info(bucket.stream)).state.consumer_count


async def test_a_waiter_cancelled_holds_nothing_and_leaves_no_consumer(
    js: jetstream.JetStream, bucket: kvstore.Bucket
) -> None:
    async with bucket.lock("jobs.nightly", ttl=60) as held:
        entered = asyncio.Event()

        async def wait() -> None:
            async with bucket.lock("jobs.nightly", ttl=60):
                entered.set()

        waiter = asyncio.ensure_future(wait())
        while await _consumers(js, bucket) == 0:  # until it watches the key
            await asyncio.sleep(0.02)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert not entered.is_set()
        assert await _consumers(js, bucket) == 0
        assert held.held
        assert (await bucket.get("jobs.nightly")).revision == held.revision


async def test_a_block_cancelled_while_holding_releases_the_lock(
    bucket: kvstore.Bucket,
) -> None:
    holding = asyncio.Event()
    leases: list[kvstore.Lease] = []

    async def hold() -> None:
        async with bucket.lock("jobs.nightly", ttl=60) as lease:
            leases.append(lease)
            holding.set()
            await asyncio.Event().wait()

    holder = asyncio.ensure_future(hold())
    await holding.wait()
    holder.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holder
    assert not leases[0].held
    async with bucket.lock("jobs.nightly", ttl=60, timeout=0) as lease:  # free at once
        assert lease.token > leases[0].token


async def test_acquisitions_cut_short_at_every_point_never_leave_the_lock_taken(
    bucket: kvstore.Bucket,
) -> None:
    for delay in (0.0, 0.001, 0.002, 0.005, 0.01, 0.02):
        attempt = asyncio.ensure_future(_enter(bucket))
        await asyncio.sleep(delay)  # cut short somewhere in the create (not synchronisation)
        attempt.cancel()
        await asyncio.gather(attempt, return_exceptions=True)
        async with bucket.lock("jobs.nightly", ttl=60, timeout=5):
            pass  # free well before the 60 s TTL: a landed create was given back


async def _enter(bucket: kvstore.Bucket) -> None:
    async with bucket.lock("jobs.nightly", ttl=60):
        pass
