"""Bucket management and data operations on a real server."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

import jetstream
import kvstore
from kvstore import Bucket, Op
from tests.conftest import BucketFactory


async def test_put_get_and_revisions(bucket: Bucket) -> None:
    first = await bucket.put("alice.name", b"Alice")
    second = await bucket.put("alice.name", bytearray(b"Al"))
    assert second > first
    entry = await bucket.get("alice.name")
    assert (entry.key, entry.value, entry.revision, entry.op) == (
        "alice.name",
        b"Al",
        second,
        Op.PUT,
    )
    assert entry.bucket == bucket.name and entry.created.tzinfo is not None
    assert (await bucket.get("alice.name", revision=first)).value == b"Alice"
    assert (await bucket.put("empty", memoryview(b""))) > second
    assert (await bucket.get("empty")).value == b""


async def test_get_missing_key_and_foreign_revision(bucket: Bucket) -> None:
    with pytest.raises(kvstore.KeyNotFoundError) as missing:
        await bucket.get("nobody")
    assert missing.value.key == "nobody"
    other = await bucket.put("other", b"x")
    with pytest.raises(kvstore.KeyNotFoundError, match="not a revision"):
        await bucket.get("nobody", revision=other)
    with pytest.raises(kvstore.KeyNotFoundError):
        await bucket.get("other", revision=other + 100)


async def test_create_refuses_a_live_value_but_not_a_tombstone(bucket: Bucket) -> None:
    rev = await bucket.create("id", b"1")
    with pytest.raises(kvstore.KeyExistsError) as exists:
        await bucket.create("id", b"2")
    assert exists.value.revision == rev and exists.value.key == "id"
    await bucket.delete("id")
    again = await bucket.create("id", b"3")
    assert (await bucket.get("id")).value == b"3"
    await bucket.purge("id")
    assert await bucket.create("id", b"4") > again


async def test_update_is_compare_and_set(bucket: Bucket) -> None:
    rev = await bucket.put("k", b"1")
    new = await bucket.update("k", b"2", rev)
    with pytest.raises(kvstore.WrongRevisionError) as wrong:
        await bucket.update("k", b"3", rev)
    assert (wrong.value.key, wrong.value.expected, wrong.value.current) == ("k", rev, new)
    assert (await bucket.get("k")).value == b"2", "a failed CAS writes nothing"
    with pytest.raises(kvstore.WrongRevisionError) as never_written:
        await bucket.update("fresh", b"x", 1)
    assert never_written.value.current == 0


async def test_delete_keeps_history_and_purge_removes_it(bucket: Bucket) -> None:
    first = await bucket.put("k", b"1")
    await bucket.put("k", b"2")
    tombstone = await bucket.delete("k")
    with pytest.raises(kvstore.KeyNotFoundError, match="delete"):
        await bucket.get("k")
    assert (await bucket.get("k", revision=first)).value == b"1", "delete keeps history"
    with pytest.raises(kvstore.KeyNotFoundError):
        await bucket.get("k", revision=tombstone)

    await bucket.purge("k")
    with pytest.raises(kvstore.KeyNotFoundError, match="purge"):
        await bucket.get("k")
    with pytest.raises(kvstore.KeyNotFoundError):
        await bucket.get("k", revision=first)
    assert (await bucket.status()).values == 1, "only the purge tombstone is left"


async def test_delete_and_purge_with_revision(bucket: Bucket) -> None:
    rev = await bucket.put("k", b"1")
    with pytest.raises(kvstore.WrongRevisionError):
        await bucket.delete("k", revision=rev + 1)
    assert (await bucket.get("k")).value == b"1"
    deleted = await bucket.delete("k", revision=rev)
    with pytest.raises(kvstore.WrongRevisionError):
        await bucket.purge("k", revision=rev)
    await bucket.purge("k", revision=deleted)
    with pytest.raises(kvstore.KeyNotFoundError):
        await bucket.get("k")


async def test_purge_deletes_compacts_tombstones(bucket: Bucket, js: jetstream.JetStream) -> None:
    await bucket.put("live", b"v")
    await bucket.put("gone", b"v1")
    await bucket.put("gone", b"v2")
    await bucket.delete("gone")
    await bucket.purge("purged")
    assert await bucket.purge_deletes() == 0, "fresh tombstones are kept by default"
    assert (await bucket.status()).values == 3, "but the history before them is removed"
    assert await bucket.purge_deletes(older_than=None) == 2
    assert (await bucket.status()).values == 1
    assert (await bucket.get("live")).value == b"v"
    with pytest.raises(jetstream.MessageNotFoundError):
        await js.get_last_message(bucket.stream, f"$KV.{bucket.name}.gone")


async def test_bucket_lifecycle(js: jetstream.JetStream, unique_name: Callable[[str], str]) -> None:
    name = unique_name("life")
    bucket = await kvstore.create_bucket(
        js, name, history=3, max_age=timedelta(hours=1), description="d", metadata={"a": "b"}
    )
    assert bucket.config.history == 3 and bucket.config.metadata == {"a": "b"}
    same = await kvstore.create_bucket(
        js, name, history=3, max_age=timedelta(hours=1), description="d", metadata={"a": "b"}
    )
    assert same.config == bucket.config, "creating the same bucket again returns it"
    with pytest.raises(kvstore.BucketExistsError):
        await kvstore.create_bucket(js, name, history=4)

    opened = await kvstore.open_bucket(js, name)
    assert opened.config == bucket.config
    assert name in await kvstore.list_buckets(js)  # or async for

    updated = await kvstore.update_bucket(js, name, history=10, marker_ttl=timedelta(seconds=5))
    assert updated.config.history == 10 and updated.config.marker_ttl == timedelta(seconds=5)
    assert updated.config.max_age == timedelta(hours=1), "fields not given are kept"
    status = await updated.status()
    assert status.history == 10 and status.stream_info.config.allow_atomic

    await kvstore.delete_bucket(js, name)
    with pytest.raises(kvstore.BucketNotFoundError):
        await kvstore.open_bucket(js, name)
    with pytest.raises(kvstore.BucketNotFoundError):
        await kvstore.delete_bucket(js, name)
    with pytest.raises(kvstore.BucketNotFoundError):
        await kvstore.update_bucket(js, name, history=2)


async def test_status_counts_values(make_bucket: BucketFactory) -> None:
    bucket = await make_bucket(history=2, max_bytes=1 << 20, compression=True)
    for i in range(5):
        await bucket.put(f"k{i}", b"x" * 10)
    status = await bucket.status()
    assert status.values == 5 and status.bytes > 50
    assert status.config.compression and status.config.max_bytes == 1 << 20


async def test_full_bucket_refuses_writes(make_bucket: BucketFactory) -> None:
    bucket = await make_bucket(max_bytes=400)
    with pytest.raises(jetstream.StorageLimitError, match="maximum bytes"):
        for i in range(100):
            await bucket.put(f"k{i}", b"x" * 50)
    assert (await bucket.status()).bytes <= 400


async def test_open_refuses_a_stream_that_is_not_a_bucket(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("notkv")
    await js.add_stream(jetstream.StreamConfig(name=f"KV_{name}", subjects=[f"other.{name}"]))
    with pytest.raises(jetstream.JetStreamError, match="not a KV bucket"):
        await kvstore.open_bucket(js, name)
    await js.delete_stream(f"KV_{name}")
