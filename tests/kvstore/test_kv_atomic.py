"""put_many, batch() and get_many on a real server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import nats
import pytest

import jetstream
import kvstore
from kvstore import Bucket
from tests.conftest import BucketFactory

RECORD = ("name", "city", "zip")


async def test_put_many_stores_every_key_and_returns_revisions(bucket: Bucket) -> None:
    revisions = await bucket.put_many(
        {"alice.name": b"Alice", "alice.city": b"Paris", "alice.zip": b"75001"}
    )
    assert list(revisions) == ["alice.name", "alice.city", "alice.zip"]
    assert sorted(revisions.values()) == list(
        range(min(revisions.values()), max(revisions.values()) + 1)
    )
    for key, revision in revisions.items():
        entry = await bucket.get(key)
        assert entry.revision == revision
    pairs = await bucket.put_many([("bob.name", b"Bob"), ("bob.city", bytearray(b"Rome"))])
    assert (await bucket.get("bob.city", revision=pairs["bob.city"])).value == b"Rome"


async def test_expect_conflict_names_the_key_and_stores_nothing(bucket: Bucket) -> None:
    revs = await bucket.put_many({"a.name": b"A", "a.city": b"Paris"})
    moved = await bucket.put("a.city", b"Lyon")
    before = (await bucket.status()).values
    with pytest.raises(kvstore.WrongRevisionError) as wrong:
        await bucket.put_many(
            {"a.name": b"A2", "a.city": b"Nice", "a.zip": b"06000"},
            expect={"a.name": revs["a.name"], "a.city": revs["a.city"]},
        )
    assert (wrong.value.key, wrong.value.expected, wrong.value.current) == (
        "a.city",
        revs["a.city"],
        moved,
    )
    assert (await bucket.status()).values == before, "nothing of the batch is stored"
    assert (await bucket.get("a.name")).value == b"A"
    ok = await bucket.put_many(
        {"a.name": b"A2", "a.city": b"Nice"}, expect={"a.name": revs["a.name"], "a.city": moved}
    )
    assert (await bucket.get_many(ok)).keys() == {"a.name", "a.city"}


async def test_expect_zero_is_create(bucket: Bucket) -> None:
    await bucket.put("x", b"live")
    await bucket.put("gone", b"v")
    await bucket.delete("gone")
    with pytest.raises(kvstore.KeyExistsError) as exists:
        await bucket.put_many({"x": b"1", "new": b"2"}, expect={"x": 0, "new": 0})
    assert exists.value.key == "x"
    revs = await bucket.put_many({"gone": b"back", "new": b"2"}, expect={"gone": 0, "new": 0})
    assert (await bucket.get("gone")).revision == revs["gone"]


async def test_ttl_for_the_batch_or_per_key(bucket: Bucket) -> None:
    await bucket.put_many({"s.a": b"1", "s.b": b"2"}, ttl=60)
    assert (await bucket.get("s.a")).ttl == 60 and (await bucket.get("s.b")).ttl == 60
    await bucket.put_many({"t.a": b"1", "t.b": b"2"}, ttl={"t.a": "1h"})
    assert (await bucket.get("t.a")).ttl == 3600 and (await bucket.get("t.b")).ttl is None


async def test_prepare_many_checks_and_queues_without_sending(bucket: Bucket) -> None:
    """Several batches prepared first: bad input in the second is refused before the first
    is stored (what an import split in batches needs), and a prepared batch is stored by
    its commit with put_many's conditions and TTLs."""
    await bucket.put("held", b"0")
    first = bucket.prepare_many({"a": b"1", "held": b"2"}, expect={"held": 1}, ttl={"a": "1h"})
    with pytest.raises(kvstore.ValueTooLargeError):
        bucket.prepare_many({"b": b"x" * (bucket.js.nc.max_payload + 1)})
    assert [key async for key in bucket.keys()] == ["held"]  # nothing sent yet
    revisions = await first.commit()
    assert (await bucket.get("held")).value == b"2"
    assert (await bucket.get("a")).ttl == 3600 and revisions["a"] == (
        await bucket.get("a")
    ).revision
    with pytest.raises(kvstore.WrongRevisionError):  # the condition is checked at commit
        await bucket.prepare_many({"held": b"3"}, expect={"held": 1}).commit()


async def test_batch_context_commits_on_exit(bucket: Bucket) -> None:
    rev = await bucket.put("u.zip", b"1")
    await bucket.put("u.phone", b"555")
    await bucket.put("u.old", b"x")
    async with bucket.batch() as batch:
        batch.put("u.city", b"Paris", ttl=60)
        batch.create("u.id", b"42")
        batch.update("u.zip", b"2", rev)
        batch.delete("u.phone")
        batch.purge("u.old")
        assert len(batch) == 5
    assert batch.revisions is not None and set(batch.revisions) == {
        "u.city", "u.id", "u.zip", "u.phone", "u.old"
    }  # fmt: skip
    snap = await bucket.get_many(["u.city", "u.id", "u.zip", "u.phone", "u.old"])
    assert {k: e.value for k, e in snap.items()} == {
        "u.city": b"Paris",
        "u.id": b"42",
        "u.zip": b"2",
    }
    assert snap.missing == ("u.phone", "u.old")
    with pytest.raises(kvstore.BatchClosedError):
        batch.put("u.more", b"x")


async def test_batch_context_abandons_on_exception(bucket: Bucket) -> None:
    with pytest.raises(KeyError):
        async with bucket.batch() as batch:
            batch.put("v.a", b"1")
            raise KeyError("boom")
    assert (await bucket.status()).values == 0
    with pytest.raises(kvstore.BatchClosedError):
        await batch.commit()


async def test_get_many_reports_missing_keys_and_splits_big_reads(bucket: Bucket) -> None:
    await bucket.put_many({f"k{i}": str(i).encode() for i in range(1000)})
    await bucket.put_many({f"k{i}": str(i).encode() for i in range(1000, 1500)})
    await bucket.delete("k7")
    keys = [f"k{i}" for i in range(1600)]
    snap = await bucket.get_many(keys)
    assert len(snap) == 1499 and snap["k1499"].value == b"1499"
    assert snap.missing == ("k7", *[f"k{i}" for i in range(1500, 1600)])
    assert snap.revision == (await bucket.status()).stream_info.state.last_seq
    empty = await bucket.get_many(["none.1", "none.2"])
    assert len(empty) == 0 and empty.missing == ("none.1", "none.2")


async def test_readers_never_see_half_a_record(bucket: Bucket) -> None:
    """A writer replaces a 3-key record atomically; concurrent get_many readers must always see
    the three keys at the same version."""
    keys = [f"rec.{field}" for field in RECORD]
    await bucket.put_many({key: b"0" for key in keys})
    stop = asyncio.Event()
    snapshots = 0

    async def write() -> None:
        for version in range(1, 150):
            await bucket.put_many({key: str(version).encode() for key in keys})
        stop.set()

    async def read() -> None:
        nonlocal snapshots
        while not stop.is_set():
            snap = await bucket.get_many(keys)
            assert len({entry.value for entry in snap.values()}) == 1, snap
            snapshots += 1

    await asyncio.gather(write(), read(), read())
    assert snapshots > 20


# -- bad input never reaches the server --------------------------------------------------------


@pytest.fixture
async def spy(nats_server: jetstream.EmbeddedServer) -> AsyncIterator[list[str]]:
    nc = await nats.connect(nats_server.url)
    seen: list[str] = []

    async def record(msg: Any) -> None:
        seen.append(msg.subject)

    await nc.subscribe("$KV.>", cb=record)
    await nc.flush()
    yield seen
    await nc.flush()
    await nc.close()


BAD_CALLS: dict[str, Callable[[Bucket], Awaitable[object]]] = {
    "too many keys": lambda b: b.put_many({f"k{i}": b"v" for i in range(1001)}),
    "too many for max_keys": lambda b: b.put_many({"a": b"1", "b": b"2"}, max_keys=1),
    "duplicate key": lambda b: b.put_many([("a", b"1"), ("b", b"2"), ("a", b"3")]),
    "invalid key": lambda b: b.put_many({"a": b"1", "b c": b"2"}),
    "invalid ttl": lambda b: b.put_many({"a": b"1"}, ttl="500ms"),
    "invalid per-key ttl": lambda b: b.put_many({"a": b"1", "b": b"2"}, ttl={"b": 0}),
    "stray expect": lambda b: b.put_many({"a": b"1"}, expect={"b": 1}),
    "stray ttl": lambda b: b.put_many({"a": b"1"}, ttl={"b": 5}),
    "bad revision": lambda b: b.put_many({"a": b"1"}, expect={"a": -1}),
    "not bytes": lambda b: b.put_many({"a": b"1", "b": "text"}),  # type: ignore[dict-item]
}


@pytest.mark.parametrize("case", BAD_CALLS)
async def test_bad_input_is_refused_before_anything_is_sent(
    bucket: Bucket, spy: list[str], js: jetstream.JetStream, case: str
) -> None:
    with pytest.raises((jetstream.ClientValidationError, TypeError)):
        await BAD_CALLS[case](bucket)
    await js.nc.flush()
    await asyncio.sleep(0.02)
    assert spy == []


async def test_batch_methods_validate_at_once(make_bucket: BucketFactory) -> None:
    bucket = await make_bucket(history=3, marker_ttl=timedelta(seconds=5), max_value_size=300)
    batch = bucket.batch(max_keys=2)
    batch.put("a", b"1")
    with pytest.raises(kvstore.InvalidKeyError, match="twice"):
        batch.delete("a")
    with pytest.raises(kvstore.InvalidTTLError, match="marker_ttl"):
        batch.put("b", b"1", ttl=1)
    with pytest.raises(kvstore.ValueTooLargeError):
        batch.put("b", b"x" * 301)
    batch.put("b", b"2")
    with pytest.raises(kvstore.BatchTooLargeError):
        batch.put("c", b"3")
    assert len(batch) == 2
    assert set(await batch.commit()) == {"a", "b"}


async def test_nats_py_reads_a_record_written_by_put_many(
    bucket: Bucket, nats_server: jetstream.EmbeddedServer
) -> None:
    revs = await bucket.put_many({"p.name": b"Ann", "p.city": b"Oslo"})
    nc = await nats.connect(nats_server.url)
    kv = await nc.jetstream().key_value(bucket.name)
    assert (await kv.get("p.name")).revision == revs["p.name"]
    assert (await kv.get("p.city")).value == b"Oslo"
    await nc.close()


# -- get_many of any size, against peers' records and concurrent writers ---------------------


async def test_get_many_over_1000_keys_when_a_peer_stored_a_wildcard_subject_last(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, js: jetstream.JetStream
) -> None:
    """A peer can store ``$KV.<b>.t.>`` literally (the library knows: purge_deletes skips such
    tombstones). If that is the bucket's newest message, ``newest_message`` returns None and
    ``_read_pinned`` takes it for "an empty bucket: every key is missing": get_many of more
    than 1000 keys, from a handle that did not write them, reports every live key missing at
    revision 0 -- a silently wrong snapshot."""
    writer = await make_bucket(history=1)
    keys = [f"k{i}" for i in range(1001)]
    await writer.put_many({key: b"v" for key in keys[:1000]})
    await writer.put(keys[1000], b"v")

    nc = await nats.connect(nats_server.url)
    try:
        await nc.jetstream().publish(f"$KV.{writer.name}.t.>", b"x")
    finally:
        await nc.close()

    reader = await kvstore.open_bucket(js, writer.name)  # no own writes to fall back on
    snapshot = await reader.get_many(keys)
    assert snapshot.missing == ()
    assert len(snapshot) == 1001
    assert snapshot.revision >= 1001


RECORD_KEYS = 100  # keys per record; a record is always written whole by one put_many


@pytest.mark.parametrize(("size", "trials"), [(1500, 12), (5000, 6)])
async def test_big_get_many_is_consistent_under_concurrent_put_many(
    make_bucket: BucketFactory, size: int, trials: int
) -> None:
    """A writer keeps rewriting whole records (every key of a record carries the record's
    version) on a history-1 bucket; every read must see every key (none is ever deleted) and
    each record at one version."""
    bucket = await make_bucket(history=1)
    keys = [f"r{i // RECORD_KEYS}.f{i % RECORD_KEYS}" for i in range(size)]
    records = [keys[i : i + RECORD_KEYS] for i in range(0, size, RECORD_KEYS)]
    for start in range(0, size, 1000):
        await bucket.put_many({key: b"0" for key in keys[start : start + 1000]})
    done = asyncio.Event()
    writes = 0

    async def write() -> None:
        nonlocal writes
        version = 0
        while not done.is_set():
            version += 1
            for record in records:
                await bucket.put_many({key: str(version).encode() for key in record})
                writes += 1

    overlapped = 0

    async def read(trials: int) -> list[str]:
        nonlocal overlapped
        problems = []
        for _ in range(trials):
            before = writes
            snapshot = await bucket.get_many(keys)
            overlapped += writes > before  # the writer really ran during the read
            if snapshot.missing:
                problems.append(f"{len(snapshot.missing)} live keys missing")
            for record in records:
                versions = {snapshot[k].value for k in record if k in snapshot}
                if len(versions) > 1:
                    problems.append(f"record {record[0]} torn: {sorted(versions)}")
        return problems

    writer = asyncio.create_task(write())
    try:
        problems = await read(trials)
    finally:
        done.set()
        await writer
    assert problems == []
    # Most reads overlap a write (a fast read can finish between two of the writer's acks).
    assert overlapped >= trials // 2, f"only {overlapped} of {trials} reads overlapped a write"
