"""Typed views (``Bucket.typed(T)``) on a real server: values in and out as ``T``, the bytes
API's semantics kept, undecodable values reported as ValueDecodeError (never a msgspec error)."""

from __future__ import annotations

import asyncio
import dataclasses

import msgspec
import pytest

import jetstream
import kvstore
from kvstore import Base64KeyCodec, Op, TypedBucket
from tests.conftest import BucketFactory


class Profile(msgspec.Struct, frozen=True):
    name: str
    age: int


@dataclasses.dataclass
class Point:
    x: float
    y: float


@pytest.mark.parametrize("fmt", ["json", "msgpack"])
async def test_round_trip_and_cas(make_bucket: BucketFactory, fmt: kvstore.ValueFormat) -> None:
    bucket = await make_bucket(history=5)
    profiles: TypedBucket[Profile] = bucket.typed(Profile, format=fmt)
    first = await profiles.create("alice", Profile("Alice", 30))
    with pytest.raises(kvstore.KeyExistsError):
        await profiles.create("alice", Profile("Eve", 1))
    second = await profiles.update("alice", Profile("Alice", 31), first)
    with pytest.raises(kvstore.WrongRevisionError):
        await profiles.update("alice", Profile("Alice", 32), first)
    entry = await profiles.get("alice")
    assert (entry.key, entry.value, entry.revision, entry.op) == (
        "alice",
        Profile("Alice", 31),
        second,
        Op.PUT,
    )
    assert (await profiles.get("alice", revision=first)).value == Profile("Alice", 30)
    raw = (await bucket.get("alice")).value
    expected = msgspec.json.encode if fmt == "json" else msgspec.msgpack.encode
    assert raw == expected(Profile("Alice", 31))  # plain JSON/MessagePack: peers can read it
    await profiles.delete("alice")
    history = await profiles.history("alice")
    assert [(e.op, e.value) for e in history] == [
        (Op.PUT, Profile("Alice", 30)),
        (Op.PUT, Profile("Alice", 31)),
        (Op.DELETE, None),
    ]


async def test_put_many_get_many_and_other_types(make_bucket: BucketFactory) -> None:
    bucket = await make_bucket()
    points = bucket.typed(Point)
    revisions = await points.put_many({"p.a": Point(1, 2), "p.b": Point(3.5, -1)})
    snapshot = await points.get_many(["p.a", "p.b", "p.c"])
    assert {k: e.value for k, e in snapshot.items()} == {"p.a": Point(1, 2), "p.b": Point(3.5, -1)}
    assert snapshot.missing == ("p.c",) and snapshot.revision == max(revisions.values())
    counts = bucket.typed(dict[str, int], format="msgpack")
    await counts.put("counts", {"a": 1})
    assert (await counts.get("counts")).value == {"a": 1}
    assert sorted([k async for k in points.keys("p.*")]) == ["p.a", "p.b"]


async def test_prepare_many_encodes_checks_and_queues_without_sending(
    make_bucket: BucketFactory,
) -> None:
    bucket = await make_bucket()
    profiles = bucket.typed(Profile)
    held = await profiles.put("held", Profile("Held", 1))
    batch = profiles.prepare_many(
        {"a": Profile("A", 2), "held": Profile("Held", 3)}, expect={"held": held}
    )
    with pytest.raises(kvstore.ValueEncodeError):  # a bad value: no batch at all
        profiles.prepare_many({"b": Profile("b", "x")})  # type: ignore[arg-type]
    assert sorted([k async for k in bucket.keys()]) == ["held"]  # nothing sent yet
    revisions = await batch.commit()
    snapshot = await profiles.get_many(["a", "held"])
    assert {k: (e.value, e.revision) for k, e in snapshot.items()} == {
        "a": (Profile("A", 2), revisions["a"]),
        "held": (Profile("Held", 3), revisions["held"]),
    }


async def test_typed_view_over_a_key_codec(make_bucket: BucketFactory) -> None:
    bucket = await make_bucket(key_codec=Base64KeyCodec())
    profiles = bucket.typed(Profile)
    await profiles.put("Acme Inc.ceo", Profile("Ada", 40))
    entry = await profiles.get("Acme Inc.ceo")
    assert (entry.key, entry.value) == ("Acme Inc.ceo", Profile("Ada", 40))


async def test_bad_values_are_refused_before_anything_is_written(
    make_bucket: BucketFactory,
) -> None:
    bucket = await make_bucket()
    profiles = bucket.typed(Profile)
    bad = [Profile("x", "not an int"), {"name": "x"}, object()]  # type: ignore[arg-type]
    for value in bad:
        with pytest.raises(kvstore.ValueEncodeError) as error:
            await profiles.put("k", value)  # type: ignore[arg-type]
        assert "'k'" in str(error.value) and isinstance(error.value, ValueError)
    with pytest.raises(kvstore.ValueEncodeError):
        await profiles.put_many({"a": Profile("a", 1), "b": Profile("b", "2")})  # type: ignore[arg-type]
    with pytest.raises(kvstore.InvalidKeyError):
        await profiles.put("bad key", Profile("a", 1))
    with pytest.raises(kvstore.InvalidKeyError):
        profiles.history("bad key")  # refused at the call, as Bucket.history does
    assert [k async for k in bucket.keys()] == []
    with pytest.raises(jetstream.ClientValidationError):
        bucket.typed(Profile, format="yaml")  # type: ignore[arg-type]
    with pytest.raises(jetstream.ClientValidationError):
        bucket.typed(object())  # type: ignore[arg-type]


async def test_undecodable_values_raise_a_typed_error(make_bucket: BucketFactory) -> None:
    bucket = await make_bucket(history=3)
    profiles = bucket.typed(Profile)
    revision = await bucket.put("alice", b'{"name": "Alice"}')  # no age
    with pytest.raises(kvstore.ValueDecodeError) as error:
        await profiles.get("alice")
    assert (error.value.key, error.value.revision) == ("alice", revision)
    assert error.value.value == b'{"name": "Alice"}'
    assert isinstance(error.value, jetstream.JetStreamError)
    assert not isinstance(error.value.__cause__, msgspec.MsgspecError)
    with pytest.raises(kvstore.ValueDecodeError):
        await profiles.get_many(["alice"])
    await bucket.put("alice", b"\xff not json")
    entries = [e async for e in profiles.history("alice")]
    assert all(e.error is not None for e in entries) and len(entries) == 2
    with pytest.raises(kvstore.ValueDecodeError):
        entries[0].value  # noqa: B018 - reading it raises


async def test_a_watch_reports_undecodable_values_and_goes_on(make_bucket: BucketFactory) -> None:
    # history 5: with 1, the delete may remove bob's put before a slow watcher got it (the
    # server then skips it, as documented; seen under load)
    bucket = await make_bucket(history=5)
    profiles = bucket.typed(Profile)
    async with profiles.watch(updates_only=True) as watcher:
        bad = await bucket.put("alice", b"garbage")
        await profiles.put("bob", Profile("Bob", 7))
        await bucket.delete("bob")
        first = await asyncio.wait_for(anext(watcher), 10)
        second = await asyncio.wait_for(anext(watcher), 10)
        third = await asyncio.wait_for(anext(watcher), 10)
    assert first.error is not None and (first.error.key, first.error.revision) == ("alice", bad)
    assert first.raw == b"garbage"
    assert (second.key, second.value, second.error) == ("bob", Profile("Bob", 7), None)
    assert (third.op, third.value) == (Op.DELETE, None)


async def test_meta_only_watch_does_not_decode(make_bucket: BucketFactory) -> None:
    bucket = await make_bucket()
    profiles = bucket.typed(Profile)
    await profiles.put("a", Profile("A", 1))
    async with profiles.watch(meta_only=True) as watcher:
        entry = await asyncio.wait_for(anext(watcher), 10)
        assert watcher.initial_done.is_set()
    assert (entry.key, entry.value, entry.error) == ("a", None, None)
