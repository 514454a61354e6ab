"""Per-key TTL and bucket max_age: expiry observed through get, and the server's markers."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

import jetstream
import kvstore
from kvstore import Bucket, Op
from kvstore._models import op_from_headers
from tests.conftest import BucketFactory


async def _wait_until_gone(bucket: Bucket, key: str, *, within: float) -> float:
    """Poll get() until the key is not found; return the seconds it took."""
    start = time.monotonic()
    while time.monotonic() - start < within:
        try:
            await bucket.get(key)
        except kvstore.KeyNotFoundError:
            return time.monotonic() - start
        await asyncio.sleep(0.05)
    raise AssertionError(f"{key!r} still present after {within}s")


async def _last_op(js: jetstream.JetStream, bucket: Bucket, key: str) -> Op | None:
    try:
        message = await js.get_last_message(bucket.stream, f"$KV.{bucket.name}.{key}")
    except jetstream.MessageNotFoundError:
        return None
    return op_from_headers(message.headers)


async def test_per_key_ttl_expires_and_leaves_an_expired_marker(
    bucket: Bucket, js: jetstream.JetStream
) -> None:
    await bucket.put("session", b"token", ttl=1)
    await bucket.put("profile", b"stays")
    entry = await bucket.get("session")
    assert entry.ttl == 1
    took = await _wait_until_gone(bucket, "session", within=5)
    assert 0.5 < took < 3
    assert await _last_op(js, bucket, "session") is Op.EXPIRED
    with pytest.raises(kvstore.KeyNotFoundError, match="expired"):
        await bucket.get("session")
    assert (await bucket.get("profile")).value == b"stays"
    await asyncio.sleep(1.5)  # the marker lives marker_ttl (1 s), then the key is simply empty
    assert await _last_op(js, bucket, "session") is None


async def test_ttl_accepts_every_documented_form(bucket: Bucket) -> None:
    for key, ttl in [("a", 60), ("b", 60.0), ("c", timedelta(minutes=1)), ("d", "1m"), ("e", "60")]:
        await bucket.put(key, b"v", ttl=ttl)
        assert (await bucket.get(key)).ttl == 60
    await bucket.put("f", b"v", ttl="never")
    assert (await bucket.get("f")).ttl == jetstream.NEVER


async def test_create_with_ttl_and_recreate_after_expiry(bucket: Bucket) -> None:
    await bucket.create("lock", b"owner-1", ttl=1)
    with pytest.raises(kvstore.KeyExistsError):
        await bucket.create("lock", b"owner-2")
    await _wait_until_gone(bucket, "lock", within=5)
    await bucket.create("lock", b"owner-2")  # succeeds over the expiry marker
    assert (await bucket.get("lock")).value == b"owner-2"


async def test_ttl_with_history_expires_the_key_not_just_a_revision(bucket: Bucket) -> None:
    """Without the rollup the server would expire the newest revision only and the older
    value would come back (protocol.md 1.5). Our TTL is a key TTL."""
    await bucket.put("k", b"old")
    await bucket.put("k", b"new", ttl=1)
    await _wait_until_gone(bucket, "k", within=5)
    await asyncio.sleep(0.3)
    with pytest.raises(kvstore.KeyNotFoundError):
        await bucket.get("k")


async def test_ttl_below_marker_ttl_is_refused_when_keeping_history(
    make_bucket: BucketFactory,
) -> None:
    """The server would stretch it to marker_ttl (protocol.md 1.3); we refuse it instead."""
    bucket = await make_bucket(history=3, marker_ttl=timedelta(seconds=5))
    with pytest.raises(kvstore.InvalidTTLError, match="marker_ttl"):
        await bucket.put("k", b"v", ttl=2)
    with pytest.raises(kvstore.InvalidTTLError, match="marker_ttl"):
        await bucket.purge("k", ttl=4)
    await bucket.put("k", b"v", ttl=5)
    await bucket.put("k", b"v", ttl="never")
    single = await make_bucket(history=1, marker_ttl=timedelta(seconds=5))
    await single.put("k", b"v", ttl=1)  # no floor with one revision per key
    assert (await single.get("k")).ttl == 1
    await _wait_until_gone(single, "k", within=5)


async def test_update_with_ttl(bucket: Bucket) -> None:
    rev = await bucket.put("k", b"1")
    await bucket.update("k", b"2", rev, ttl=1)
    await _wait_until_gone(bucket, "k", within=5)


async def test_bucket_max_age_expires_values_and_never_survives_it(
    make_bucket: BucketFactory, js: jetstream.JetStream
) -> None:
    bucket = await make_bucket(max_age=timedelta(seconds=1), marker_ttl=timedelta(seconds=5))
    await bucket.put("short", b"v")
    await bucket.put("forever", b"v", ttl="never")
    await _wait_until_gone(bucket, "short", within=5)
    assert await _last_op(js, bucket, "short") is Op.EXPIRED
    assert (await bucket.get("forever")).value == b"v"


async def test_purge_with_ttl_leaves_a_tombstone_that_vanishes(
    bucket: Bucket, js: jetstream.JetStream
) -> None:
    await bucket.put("k", b"v")
    await bucket.purge("k", ttl=1)
    assert await _last_op(js, bucket, "k") is Op.PURGE
    deadline = time.monotonic() + 5
    while await _last_op(js, bucket, "k") is not None:
        assert time.monotonic() < deadline, "the purge tombstone should expire"
        await asyncio.sleep(0.1)


async def test_without_marker_ttl_expiry_is_silent(
    make_bucket: BucketFactory, js: jetstream.JetStream
) -> None:
    bucket = await make_bucket()
    await bucket.put("k", b"v", ttl=1)
    await _wait_until_gone(bucket, "k", within=5)
    assert await _last_op(js, bucket, "k") is None
