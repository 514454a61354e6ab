"""A batch made with ``repeats=True`` writes a key more than once, each write its own revision in
the order queued (a change log applied as it came, atomically); the writes the server refuses
on a subject already in the batch are refused before anything is sent."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest

import kvstore

BucketFactory = Callable[..., Awaitable[kvstore.Bucket]]


async def _history(bucket: kvstore.Bucket, key: str) -> list[tuple[str, bytes]]:
    return [(e.op.value, e.value) for e in await bucket.history(key)]


async def test_a_repeated_key_becomes_one_revision_per_write_in_order(
    make_bucket: BucketFactory,
) -> None:
    bucket = await make_bucket(history=10)
    async with bucket.batch(repeats=True) as batch:
        batch.put("a", b"1")
        batch.put("b", b"x")
        batch.put("a", b"2")
        batch.delete("a")
        batch.put("a", b"3")
    assert await _history(bucket, "a") == [
        ("PUT", b"1"),
        ("PUT", b"2"),
        ("DEL", b""),
        ("PUT", b"3"),
    ]
    assert batch.revisions == {"a": 5, "b": 2}  # a key's last revision
    assert (await bucket.get("a")).value == b"3"


async def test_without_repeats_a_key_is_written_once(make_bucket: BucketFactory) -> None:
    bucket = await make_bucket()
    batch = bucket.batch()
    batch.put("a", b"1")
    with pytest.raises(kvstore.InvalidKeyError, match="twice"):
        batch.put("a", b"2")


async def test_a_repeat_carrying_a_condition_or_a_rollup_is_refused_before_sending(
    make_bucket: BucketFactory,
) -> None:
    bucket = await make_bucket(history=5, marker_ttl=timedelta(seconds=1))
    batch = bucket.batch(repeats=True)
    batch.put("a", b"1")
    with pytest.raises(kvstore.InvalidKeyError, match="no condition"):
        batch.update("a", b"2", revision=1)
    with pytest.raises(kvstore.InvalidKeyError, match="no condition"):
        batch.purge("a")
    with pytest.raises(kvstore.InvalidKeyError, match="no condition"):
        batch.put("a", b"2", ttl=60)  # a key TTL is a rollup when the bucket keeps history
    batch.create("b", b"1")
    batch.put("b", b"2")  # a plain write after a conditioned one is fine
    await batch.commit()
    assert await _history(bucket, "a") == [("PUT", b"1")]
    assert await _history(bucket, "b") == [("PUT", b"1"), ("PUT", b"2")]
