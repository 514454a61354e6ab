"""A listing's consumer is deleted however the listing ends: also when its task is cancelled
just as the scan reaches the end (the moment the scan closes its consumer)."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import BucketFactory

pytestmark = pytest.mark.integration


async def test_a_listing_cancelled_as_its_scan_ends_deletes_its_consumer(
    make_bucket: BucketFactory,
) -> None:
    """The end of a scan closes its consumer; a cancel landing then (a blocking iterator
    closed early, a task cancelled) interrupted the close before the delete, and the consumer
    stayed on the server for its inactive threshold."""
    bucket = await make_bucket()
    await bucket.put_many({f"k.{n}": b"v" for n in range(20)})
    for _ in range(5):
        keys: list[str] = []

        async def listing(keys: list[str]) -> None:
            async for key in bucket.keys():
                keys.append(key)

        task = asyncio.create_task(listing(keys))
        while len(keys) < 20 and not task.done():
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.wait([task])
        assert [name async for name in bucket.js.consumer_names(bucket.stream)] == []
