"""A lock is held by one holder at a time, across processes, and each holder's fencing token
is greater than every earlier holder's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import jetstream
import kvstore
from tests.conftest import BucketFactory
from tests.kvstore import lock_process

PROCESSES = 3
ROUNDS = 4


def _check_journal(lines: list[str], holds: int) -> None:
    """Every "in" is followed by its own "out" before anyone else's "in"; tokens grow."""
    assert len(lines) == 2 * holds, lines
    last_token = 0
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):
        tag_in, token_in, pid_in = enter.split()
        tag_out, token_out, pid_out = leave.split()
        assert (tag_in, tag_out) == ("in", "out"), f"two holders at once: {enter!r} {leave!r}"
        assert (token_in, pid_in) == (token_out, pid_out)
        assert int(token_in) > last_token, f"token {token_in} after {last_token}"
        last_token = int(token_in)


@pytest.mark.parametrize(
    ("processes", "rounds"),
    [(PROCESSES, ROUNDS), pytest.param(6, 40, marks=pytest.mark.locks_long)],
)
async def test_processes_taking_one_lock_never_hold_it_together(
    nats_server: jetstream.EmbeddedServer,
    make_bucket: BucketFactory,
    tmp_path: Path,
    processes: int,
    rounds: int,
) -> None:
    bucket = await make_bucket(history=1)
    journal = tmp_path / "journal"
    started = [
        await lock_process.start(
            nats_server.url, bucket.name, "jobs.nightly", "journal", str(journal), str(rounds)
        )
        for _ in range(processes)
    ]
    codes = await asyncio.wait_for(asyncio.gather(*(p.wait() for p in started)), 600)
    assert codes == [0] * processes
    _check_journal(journal.read_text().splitlines(), processes * rounds)


async def test_tasks_taking_one_lock_never_hold_it_together(
    make_bucket: BucketFactory, tmp_path: Path
) -> None:
    bucket = await make_bucket(history=5, marker_ttl="1s")
    lines: list[str] = []

    async def holder(n: int) -> None:
        for _ in range(ROUNDS):
            async with bucket.lock("jobs.nightly", ttl=3, timeout=60) as lease:
                assert lease.held
                lines.append(f"in {lease.token} {n}")
                await asyncio.sleep(0.01)  # work while holding: another holder would show
                lines.append(f"out {lease.token} {n}")
            assert not lease.held

    await asyncio.gather(*(holder(n) for n in range(4)))
    _check_journal(lines, 4 * ROUNDS)


async def test_a_released_lock_leaves_no_value_and_the_next_waiter_goes_on(
    bucket: kvstore.Bucket,
) -> None:
    async with bucket.lock("jobs.nightly", ttl=60) as first:
        waiter = asyncio.ensure_future(_take(bucket))
        with pytest.raises(kvstore.LockTimeoutError):
            await _take(bucket, timeout=0)
    token = await asyncio.wait_for(waiter, 30)  # the release freed it, not the 60 s TTL
    assert token > first.token
    with pytest.raises(kvstore.KeyNotFoundError):
        await bucket.get("jobs.nightly")


async def _take(bucket: kvstore.Bucket, timeout: float = 60) -> int:
    async with bucket.lock("jobs.nightly", ttl=60, timeout=timeout) as lease:
        return lease.token
