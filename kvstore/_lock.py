"""Acquiring a lease: race for the create, and between tries follow the key through a watch
(released: a purge; expired: the server's marker, on buckets with ``marker_ttl``) or, where
expiry is silent, poll."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from ._errors import LockTimeoutError
from ._lease import Lease, LeaseBucket
from ._models import Op

if TYPE_CHECKING:
    from ._watch import KeyWatcher

__all__ = ["held_lease", "poll_interval"]

_POLLS_PER_TTL = 4


def poll_interval(bucket: LeaseBucket, ttl: int) -> float:
    """Seconds between create attempts of a waiter with no event to wake it. Without
    ``marker_ttl`` a lease that expires (its holder died) leaves no trace a watch sees:
    waiters try every quarter TTL. With markers the watch sees the expiry, and the attempt
    every TTL only guards against a missed event."""
    return float(ttl) if bucket.config.marker_ttl is not None else ttl / _POLLS_PER_TTL


@contextlib.asynccontextmanager
async def held_lease(
    bucket: LeaseBucket, key: str, value: bytes, ttl: int, timeout: float | None
) -> AsyncIterator[Lease]:
    """The lease on ``key`` for the length of the block, released when it is left.

    Raises:
        LockTimeoutError: not acquired within ``timeout`` seconds (None: wait for ever).
        MessageTTLDisabledError: the bucket has no per-message TTL (nothing stored).
    """
    lease = Lease(bucket, key, value, ttl)
    try:
        await _acquire(bucket, lease, timeout)
    except BaseException:
        await lease._abandon()  # a create cut short may have landed: give it back
        raise
    try:
        yield lease
    finally:
        await lease.release()


async def _acquire(bucket: LeaseBucket, lease: Lease, timeout: float | None) -> None:
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    if await lease._take():
        return
    # The watch starts before the next attempt, so no release after it goes unseen.
    async with bucket.watch(lease.key, updates_only=True, meta_only=True) as watcher:
        poll = poll_interval(bucket, lease.ttl)
        freed: int | None = None
        while not await lease._take(over=freed):
            wait = poll if deadline is None else min(poll, deadline - loop.time())
            if wait <= 0:
                assert timeout is not None
                raise LockTimeoutError(lease.key, timeout)
            freed = await _until_freed(watcher, wait)


async def _until_freed(watcher: KeyWatcher, seconds: float) -> int | None:
    """The revision of the tombstone or marker that freed the watched key (deleted, purged,
    expired), or None after ``seconds`` without one."""
    try:
        async with asyncio.timeout(seconds) as scope:
            async for entry in watcher:
                if entry.op is not Op.PUT:
                    return entry.revision
    except TimeoutError:
        if not scope.expired():
            raise  # the watch's own request timed out
    return None
