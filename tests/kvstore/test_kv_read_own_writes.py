"""A handle reads its own writes even when a replica that trails the leader answers.

Direct gets go to any replica. A sealed mirror with ``mirror_direct`` is a replica that stays
behind for good: it answers about half of the bucket's direct gets, with what the bucket held
when it was sealed. (On a cluster the same happens for milliseconds after each write; the
cluster fault test met it.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

import jetstream
import kvstore
from kvstore import _ranges, _snapshot
from kvstore._ranges import read_keys
from kvstore._snapshot import newest_message
from tests.conftest import BucketFactory

READS = 40  # a trailing replica answers each with even odds: all 40 right by luck is 2**-40


@contextlib.asynccontextmanager
async def frozen_mirror(js: jetstream.JetStream, bucket: kvstore.Bucket) -> AsyncIterator[None]:
    """A replica frozen at what ``bucket`` holds now, answering its direct gets."""
    mirror = jetstream.StreamConfig(
        name=f"{bucket.stream}_TRAIL",
        mirror={"name": bucket.stream},
        storage="memory",
        allow_direct=True,
        mirror_direct=True,
    )
    last = (await js.stream_info(bucket.stream)).state.last_seq
    await js.add_stream(mirror)
    try:
        async with asyncio.timeout(10):
            while (await js.stream_info(mirror.name)).state.last_seq < last:
                await asyncio.sleep(0.02)  # the mirror copies, then starts answering
        await js.update_stream(msgspec.structs.replace(mirror, sealed=True))
        yield
    finally:
        await js.delete_stream(mirror.name)


@pytest.fixture
async def trailed(
    js: jetstream.JetStream, make_bucket: BucketFactory
) -> AsyncIterator[kvstore.Bucket]:
    """A bucket holding k=old, with a replica frozen at that point answering direct gets."""
    bucket = await make_bucket()
    await bucket.put("k", b"old")
    async with frozen_mirror(js, bucket):
        yield bucket


async def test_the_trailing_replica_does_answer(
    js: jetstream.JetStream, trailed: kvstore.Bucket
) -> None:
    """The premise of the tests below: raw direct gets see the frozen value."""
    await trailed.put("k", b"new")
    values = set()
    for _ in range(READS):
        message = await js.get_last_message(trailed.stream, "$KV." + trailed.name + ".k")
        values.add(message.data)
    assert values == {b"old", b"new"}


async def test_get_returns_the_handles_own_write(trailed: kvstore.Bucket) -> None:
    revision = await trailed.put("k", b"new")
    for _ in range(READS):
        entry = await trailed.get("k")
        assert (entry.value, entry.revision) == (b"new", revision)


async def test_a_key_written_after_the_replica_froze_is_found(trailed: kvstore.Bucket) -> None:
    """The trailing replica has no message for it at all (404), which is not the answer."""
    revision = await trailed.put("fresh", b"v")
    for _ in range(READS):
        assert (await trailed.get("fresh")).value == b"v"
        assert (await trailed.get("fresh", revision=revision)).value == b"v"


async def test_a_delete_by_this_handle_is_seen(trailed: kvstore.Bucket) -> None:
    await trailed.delete("k")
    for _ in range(READS):
        with pytest.raises(kvstore.KeyNotFoundError):
            await trailed.get("k")


async def test_put_many_then_get_many_sees_the_whole_record(trailed: kvstore.Bucket) -> None:
    revisions = await trailed.put_many({"k": b"new", "other": b"x"})
    for _ in range(READS // 4):
        snapshot = await trailed.get_many(["k", "other"])
        assert snapshot.revision >= max(revisions.values())
        assert {key: entry.value for key, entry in snapshot.items()} == {
            "k": b"new",
            "other": b"x",
        }


async def test_create_after_own_delete_is_not_refused(trailed: kvstore.Bucket) -> None:
    """create reads the key first; the frozen replica still shows the live value."""
    await trailed.delete("k")
    for i in range(READS // 4):
        revision = await trailed.create("k", f"v{i}".encode())
        assert (await trailed.get("k")).revision == revision
        await trailed.delete("k")


async def test_create_over_another_handles_delete_is_not_refused(
    js: jetstream.JetStream, trailed: kvstore.Bucket
) -> None:
    """The refusal names the tombstone's revision: an older answer is a trailing replica."""
    other = await kvstore.open_bucket(js, trailed.name)
    for i in range(READS // 4):
        await other.delete("k")
        fresh = await kvstore.open_bucket(js, trailed.name)  # no writes of its own
        revision = await fresh.create("k", f"v{i}".encode())
        assert (await other.get("k", revision=revision)).value == f"v{i}".encode()


async def test_get_many_over_several_requests_never_mixes_a_trailing_replica_in(
    js: jetstream.JetStream, make_bucket: BucketFactory
) -> None:
    """Beyond 1000 keys get_many sends several batched gets pinned to one sequence. A replica
    behind that sequence answers as of its own last one, and the server's reply does not say
    so: one request answered by the leader and one by the frozen replica gave half of a
    ``put_many`` old and half new."""
    bucket = await make_bucket()
    keys = [f"k{i:04}" for i in range(2000)]
    record = keys[990:1010]  # one put_many across the first two requests (1000 keys each)
    for start in range(0, len(keys), 1000):
        await bucket.put_many({key: b"v" for key in keys[start : start + 1000]})
    await bucket.put_many({key: b"old" for key in record})
    async with frozen_mirror(js, bucket):
        revisions = await bucket.put_many({key: b"new" for key in record})
        for _ in range(READS // 2):
            snapshot = await bucket.get_many(keys)
            assert {snapshot[key].value for key in record} == {b"new"}
            assert snapshot.revision >= max(revisions.values())
            assert len(snapshot) == len(keys) and not snapshot.missing


async def test_partition_key_reads_never_take_a_trailing_replicas_answer(
    js: jetstream.JetStream, make_bucket: BucketFactory
) -> None:
    """The Spark reader's ``KEYS`` partitions: batched gets pinned to the planned sequence.
    Each must be as of that sequence, or be read again (or through a consumer)."""
    bucket = await make_bucket(history=5)
    keys = [f"k{i:04}" for i in range(1500)]
    await bucket.put_many({key: b"old" for key in keys[:1000]})
    await bucket.put_many({key: b"old" for key in keys[1000:]})
    async with frozen_mirror(js, bucket):
        await bucket.put_many({key: b"new" for key in keys[500:1000]})
        await bucket.put_many({key: b"new" for key in keys[1000:1500]})
        witness = await newest_message(js, bucket.stream, f"$KV.{bucket.name}.>")
        assert witness is not None
        subjects = [bucket._core.subject(key) for key in keys]
        for _ in range(READS // 4):
            found = await read_keys(js, bucket.stream, [f"$KV.{bucket.name}.>"], subjects, witness)
            values = {m.subject[-5:]: m.data for m in found}
            assert sorted(values) == keys
            assert {values[key] for key in keys[500:]} == {b"new"}
            assert {values[key] for key in keys[:500]} == {b"old"}


async def test_get_many_whose_first_request_finds_nothing_on_the_trailing_replica(
    js: jetstream.JetStream, make_bucket: BucketFactory
) -> None:
    """The keys of the first request did not exist when the replica froze: its empty answer
    must not pass for the bucket at a pin taken elsewhere."""
    bucket = await make_bucket()
    first = [f"a{i:04}" for i in range(1000)]
    second = [f"b{i:04}" for i in range(1000)]
    await bucket.put_many({key: b"old" for key in second})
    async with frozen_mirror(js, bucket):
        await bucket.put_many({"a0000": b"new", "b0000": b"new"})
        for _ in range(READS // 2):
            snapshot = await bucket.get_many(first + second)
            got = {key: snapshot[key].value if key in snapshot else None for key in first[:1]}
            got["b0000"] = snapshot["b0000"].value
            assert got == {"a0000": b"new", "b0000": b"new"}


async def test_a_removed_last_message_does_not_force_the_slow_paths(
    js: jetstream.JetStream, make_bucket: BucketFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream's last sequence can name a message that is gone (here a tombstone removed
    by ``purge_deletes``): pins are the newest message that exists, so neither ``get_many``
    nor a partition's key read falls back to reading through a consumer."""
    bucket = await make_bucket(history=5)
    keys = [f"k{i:04}" for i in range(1500)]
    await bucket.put_many({key: b"v" for key in keys[:1000]})
    await bucket.put_many({key: b"v" for key in keys[1000:]})
    await bucket.put("gone", b"x")
    await bucket.delete("gone")
    await bucket.purge_deletes(older_than=None)
    info = await js.stream_info(bucket.stream)
    witness = await newest_message(js, bucket.stream, f"$KV.{bucket.name}.>")
    assert witness is not None and witness.seq < info.state.last_seq  # the premise

    async def no_fallback(*args: object, **kwargs: object) -> None:
        raise AssertionError("fell back to a consumer read")

    monkeypatch.setattr(_snapshot, "_read_by_consumer", no_fallback)
    monkeypatch.setattr(_ranges, "_scan", no_fallback)
    snapshot = await bucket.get_many(keys)
    assert len(snapshot) == len(keys) and snapshot.revision == witness.seq
    subjects = [bucket._core.subject(key) for key in keys]
    found = await read_keys(js, bucket.stream, [f"$KV.{bucket.name}.>"], subjects, witness)
    assert len(found) == len(keys)


async def test_a_range_scan_never_returns_a_revision_older_than_the_planned_one(
    js: jetstream.JetStream, make_bucket: BucketFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """History 2, read through consumers (``SUFFIX``): k@1, x@2, k@3 at planning (up_to 3).
    The partition 1..2 keeps k@1; two writes of k between its scan and the check remove k@1
    and k@3. k's revision at 3 is not the partition's to return, and k@1 never was."""
    bucket = await make_bucket(history=2)
    await bucket.put("k", b"old")
    await bucket.put("x", b"x")
    await bucket.put("k", b"new")
    real_scan = _ranges._scan

    async def scan_then_rewrite(*args: Any, **kwargs: Any) -> Any:
        found = await real_scan(*args, **kwargs)
        await bucket.put("k", b"w1")  # a writer right after the range was read
        await bucket.put("k", b"w2")
        return found

    monkeypatch.setattr(_ranges, "_scan", scan_then_rewrite)
    prefix = f"$KV.{bucket.name}."
    found = await _ranges.read_latest(
        js, bucket.stream, [prefix + ">"], 1, 2, 3, _ranges.LastCheck.SUFFIX
    )
    assert {m.subject[len(prefix) :]: m.seq for m in found} == {"x": 2}


async def test_the_fallback_scan_never_returns_a_revision_older_than_the_planned_one(
    js: jetstream.JetStream, make_bucket: BucketFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """History 2, a key partition whose witness is gone and whose replicas cannot show they
    have the pin scans the stream to the pin: it sees k@1, then two writes of k remove k@1
    and k@1502 (k's value at the pin) before the scan reaches k@1502. k is left out
    (rewritten beyond the history), never returned as k@1."""
    bucket = await make_bucket(history=2)
    await bucket.put("k", b"old")
    for start in range(0, 1500, 500):  # enough that the scan has not fetched k@1502 yet
        await bucket.put_many({f"f{i}": b"." for i in range(start, start + 500)})
    await bucket.put("k", b"new")
    await bucket.put("w", b"w")
    prefix = f"$KV.{bucket.name}."
    witness = await newest_message(js, bucket.stream, prefix + ">")
    assert witness is not None
    await bucket.put("w", b"w2")
    await bucket.put("w", b"w3")  # the witness is gone: the partition scans
    real = _ranges.scan_stream

    async def scan_with_a_writer(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        first = True
        async with contextlib.aclosing(real(*args, **kwargs)) as messages:
            async for message in messages:
                yield message
                if first:
                    first = False
                    await bucket.put("k", b"w1")
                    await bucket.put("k", b"w2")

    async def replicas_behind(*args: Any) -> None:
        return None

    monkeypatch.setattr(_ranges, "_current_last_messages", replicas_behind)
    monkeypatch.setattr(_ranges, "scan_stream", scan_with_a_writer)
    found = await read_keys(js, bucket.stream, [prefix + ">"], [prefix + "k"], witness)
    assert found == [] or [(m.seq, m.data) for m in found] == [(1502, b"new")]


async def test_a_rewritten_witness_scans_only_the_keys_written_since_planning(
    js: jetstream.JetStream, make_bucket: BucketFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planned witness is the newest message, often of a hot key, soon rewritten beyond
    the history. A key partition then reads the keys' current values (from replicas that
    report the pin) and scans only the keys written since planning, not the whole stream; the
    values are still those at the pin."""
    bucket = await make_bucket(history=2)
    keys = [f"k{i:04}" for i in range(1200)]
    await bucket.put_many({key: b"old" for key in keys[:600]})
    await bucket.put_many({key: b"old" for key in keys[600:]})
    await bucket.put_many({"k0001": b"at-pin", "k0700": b"at-pin"})
    await bucket.put("hot", b"1")
    prefix = f"$KV.{bucket.name}."
    witness = await newest_message(js, bucket.stream, prefix + ">")
    assert witness is not None and witness.subject == prefix + "hot"
    for n in range(2, 5):
        await bucket.put("hot", b"%d" % n)  # the witness is gone
    await bucket.put_many({"k0001": b"after", "k0002": b"after"})
    scanned: list[list[str]] = []
    real_scan = _ranges._scan

    async def recorded(js_: Any, stream: str, filters: list[str], *args: Any) -> Any:
        scanned.append(sorted(filters))
        return await real_scan(js_, stream, filters, *args)

    monkeypatch.setattr(_ranges, "_scan", recorded)
    subjects = [bucket._core.subject(key) for key in keys]
    found = await read_keys(js, bucket.stream, [prefix + ">"], subjects, witness)
    values = {m.subject[len(prefix) :]: m.data for m in found}
    assert sorted(values) == keys
    assert values["k0001"] == values["k0700"] == b"at-pin"
    assert values["k0002"] == values["k0003"] == b"old"
    assert scanned == [[prefix + "k0001", prefix + "k0002"]]


async def test_get_many_sees_its_own_rewrite_of_keys_the_replica_holds(
    js: jetstream.JetStream, make_bucket: BucketFactory
) -> None:
    """Every key has an old value on the frozen replica, so its answer misses nothing: only
    the floor of this handle's own writes of those keys can refuse it."""
    bucket = await make_bucket()
    await bucket.put_many({"k": b"old", "other": b"old"})
    async with frozen_mirror(js, bucket):
        revisions = await bucket.put_many({"k": b"new", "other": b"new"})
        for _ in range(READS // 2):
            snapshot = await bucket.get_many(["k", "other"])
            assert {key: entry.value for key, entry in snapshot.items()} == {
                "k": b"new",
                "other": b"new",
            }
            assert snapshot.revision >= max(revisions.values())
