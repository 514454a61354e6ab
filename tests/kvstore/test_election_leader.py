"""An election has one leader at a time; leader() names it; observe() sees every new leader
once (renewals are no change), the current one first."""

from __future__ import annotations

import asyncio

import pytest

import kvstore


async def _next(observed: asyncio.Queue[bytes]) -> bytes:
    return await asyncio.wait_for(observed.get(), 30)


async def test_candidates_lead_one_at_a_time_and_observe_sees_each_once(
    bucket: kvstore.Bucket,
) -> None:
    election = bucket.election("leaders.indexer", ttl=3)
    assert await election.leader() is None
    observed: asyncio.Queue[bytes] = asyncio.Queue()
    leading: list[bytes] = []
    turn = asyncio.Event()

    async def observe() -> None:
        async for value in election.observe():
            observed.put_nowait(value)

    async def candidate(value: bytes) -> None:
        async with election.campaign(value) as lease:
            assert not leading, f"{value!r} elected while {leading} leads"
            leading.append(value)
            assert await election.leader() == value
            await turn.wait()  # lead until the test moves on
            turn.clear()
            leading.remove(value)
            assert lease.held

    async with election.campaign(b"node-0") as lease:
        watcher = asyncio.ensure_future(observe())
        assert await _next(observed) == b"node-0"  # the current leader first
        candidates = [asyncio.ensure_future(candidate(f"node-{n}".encode())) for n in (1, 2, 3)]
        while lease.revision == lease.token:  # until node-0 renewed its lease (every 1 s)
            await asyncio.sleep(0.05)
    seen = [await _next(observed)]  # not node-0 again: a renewal is no change
    for _ in range(2):
        turn.set()
        seen.append(await _next(observed))
    turn.set()
    await asyncio.gather(*candidates)
    assert sorted(seen) == [b"node-1", b"node-2", b"node-3"]
    assert await election.leader() is None
    async with election.campaign(b"node-0"):  # the same value again is a new leader
        assert await _next(observed) == b"node-0"
    watcher.cancel()
    await asyncio.gather(watcher, return_exceptions=True)


async def test_a_candidate_not_elected_in_time_gives_up_holding_nothing(
    bucket: kvstore.Bucket,
) -> None:
    election = bucket.election("leaders.indexer", ttl=30)
    async with election.campaign(b"node-1"):
        with pytest.raises(kvstore.LockTimeoutError):
            async with election.campaign(b"node-2", timeout=0.3):
                pass
        assert await election.leader() == b"node-1"
    assert await election.leader() is None


async def test_a_leader_resigning_lets_the_next_candidate_lead_at_once(
    bucket: kvstore.Bucket,
) -> None:
    election = bucket.election("leaders.indexer", ttl=60)
    async with election.campaign(b"node-1") as first:
        second = asyncio.ensure_future(_lead(election, b"node-2"))
    token = await asyncio.wait_for(second, 30)  # the resignation freed it, not the 60 s TTL
    assert token > first.token


async def _lead(election: kvstore.Election, value: bytes) -> int:
    async with election.campaign(value) as lease:
        assert await election.leader() == value
        return lease.token
