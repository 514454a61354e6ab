"""``Bucket.purge_deletes``: remove tombstones and expiry markers, many purges in flight."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

from jetstream import StoredMessage
from jetstream._consume.scan import scan_stream

from ._core import BucketCore
from ._models import Op, op_from_headers

__all__ = ["PURGES_IN_FLIGHT", "compact_deletes"]

_log = logging.getLogger("kvstore")

PURGES_IN_FLIGHT = 32
"""Purge requests awaited at once. One purge per tombstone, each a round trip: one at a time,
100,000 tombstones cost 100,000 round trips end to end."""


async def compact_deletes(bucket: BucketCore, older_than: timedelta | None) -> int:
    """Purge every tombstone or marker of ``bucket`` (see ``Bucket.purge_deletes``); how many
    keys were removed entirely. The first failed purge is raised once the others in flight are
    cancelled.

    Raises:
        JetStreamError: the scan or a purge failed.
    """
    now = datetime.now(UTC)
    removed = 0
    running: set[asyncio.Task[bool]] = set()
    try:
        async for message in scan_stream(
            bucket.js, bucket.stream, [f"{bucket.prefix}>"], headers_only=True
        ):
            if not _is_purgeable(bucket, message):
                continue
            if len(running) >= PURGES_IN_FLIGHT:
                removed += await _settle_some(running)
            old = not older_than or now - message.time > older_than
            running.add(asyncio.ensure_future(_purge(bucket, message.subject, old)))
        while running:
            removed += await _settle_some(running)
    finally:
        await _cancel_all(running)
    return removed


def _is_purgeable(bucket: BucketCore, message: StoredMessage) -> bool:
    if op_from_headers(message.headers) is Op.PUT:
        return False
    if _has_wildcard(message.subject):
        _log.warning(
            "bucket %r: purge_deletes leaves the tombstone on %r (a wildcard subject)",
            bucket.name,
            message.subject,
        )
        return False
    return True


def _has_wildcard(subject: str) -> bool:
    """A ``*`` or ``>`` token: used as a filter, the subject matches more than itself."""
    return any(token in ("*", ">") for token in subject.split("."))


async def _purge(bucket: BucketCore, subject: str, old: bool) -> bool:
    """Purge one key: wholly if its tombstone is ``old``, else all but the tombstone."""
    await bucket.js.purge_stream(bucket.stream, subject=subject, keep=None if old else 1)
    return old


async def _settle_some(running: set[asyncio.Task[bool]]) -> int:
    """Wait for at least one purge to finish; how many of the finished removed a key. Raises
    the first failure (every finished task's outcome is retrieved)."""
    done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
    running -= done
    failures = [error for task in done if (error := task.exception()) is not None]
    if failures:
        raise failures[0]
    return sum(task.result() for task in done)


async def _cancel_all(running: set[asyncio.Task[bool]]) -> None:
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running)
    for task in running:  # retrieved: the error that ended the compaction is the one raised
        if not task.cancelled():
            task.exception()
