"""Locks: the cost of acquiring and releasing a lock, and of fencing a ``put_many``.

python -m benchmarks --sizes --get-size 0 --cas-writes 0 --watch-rounds 0 --object-sizes \\
    --pcg-messages 0 --sync-ops 0 --rss-mib 0 --lock-ops 100    # locks only
"""

from __future__ import annotations

import kvstore

from ._harness import Scenario

VALUE = b"x" * 100
TTL = 10


def acquire_release_scenario(bucket: kvstore.Bucket, n: int) -> Scenario:
    """``n`` uncontended lock / release cycles vs the same two writes by hand on one key (a
    create with a TTL over the last release's tombstone, a purge conditioned on its revision),
    without the lease's record and renewer."""

    async def locks() -> None:
        for _ in range(n):
            async with bucket.lock("bench.lock", ttl=TTL):
                pass

    async def by_hand() -> None:
        for _ in range(n):
            revision = await bucket.create("bench.hand", b"", ttl=TTL)
            await bucket.purge("bench.hand", revision=revision)

    return Scenario(
        f"lock acquire + release, {n} cycles",
        n,
        {"kvstore lock() (async with)": locks, "create + conditioned purge by hand": by_hand},
        baseline="kvstore lock() (async with)",
        unit="cycles",
    )


def fenced_put_many_scenario(bucket: kvstore.Bucket, lease: kvstore.Lease, n: int) -> Scenario:
    """``put_many`` of ``n`` keys fenced by a held lease vs the same ``put_many`` plain."""
    records = {f"bench.fenced.k{i}": VALUE for i in range(n)}

    async def fenced() -> None:
        await bucket.put_many(records, fence=lease)

    async def plain() -> None:
        await bucket.put_many(records)

    return Scenario(
        f"put_many of {n} keys, fenced",
        n,
        {"kvstore put_many(fence=lease)": fenced, "kvstore put_many (no fence)": plain},
        baseline="kvstore put_many(fence=lease)",
    )


async def measure(bucket: kvstore.Bucket, n: int, keys: int, rounds: int) -> list[Scenario]:
    """Both scenarios on ``bucket``: ``n`` lock cycles, ``keys`` keys per ``put_many``."""
    cycles = acquire_release_scenario(bucket, n)
    await cycles.run(rounds)
    async with bucket.lock("bench.fence", ttl=TTL) as lease:
        fencing = fenced_put_many_scenario(bucket, lease, keys)
        await fencing.run(rounds)
    return [cycles, fencing]
