"""Buckets opened with a key codec, on a real server: user keys in, user keys out, stored keys
exactly as orbit.go kvcodec stores them (vectors derived by hand in test_codecs.py)."""

from __future__ import annotations

import asyncio

import pytest
from nats.js import JetStreamContext

import jetstream
import kvstore
from jetstream._consume.scan import scan_stream
from kvstore import Base64KeyCodec, ChainKeyCodec, Op, PathKeyCodec
from kvstore._stages import ValueContext
from tests.conftest import BucketFactory
from tests.peer_reads import peer_keys


async def _subjects(js: jetstream.JetStream, bucket: kvstore.Bucket) -> list[str]:
    stream = bucket.stream
    found = []
    async for message in scan_stream(js, stream, [f"$KV.{bucket.name}.>"]):
        found.append(message.subject)
    return found


async def test_base64_keys_are_stored_as_orbit_stores_them(
    js: jetstream.JetStream, make_bucket: BucketFactory, peer: JetStreamContext
) -> None:
    bucket = await make_bucket(history=3, key_codec=Base64KeyCodec())
    revision = await bucket.put("Acme Inc.contact", b"info@acme.com")
    # orbit.go: per-token RawURLEncoding -> QWNtZSBJbmM.Y29udGFjdA (derivation in the unit test)
    assert await _subjects(js, bucket) == [f"$KV.{bucket.name}.QWNtZSBJbmM.Y29udGFjdA"]
    entry = await bucket.get("Acme Inc.contact")
    assert (entry.key, entry.value, entry.revision) == (
        "Acme Inc.contact",
        b"info@acme.com",
        revision,
    )

    kv = await peer.key_value(bucket.name)  # a peer without the codec sees the stored key
    assert await peer_keys(kv) == ["QWNtZSBJbmM.Y29udGFjdA"]
    assert (await kv.get("QWNtZSBJbmM.Y29udGFjdA")).value == b"info@acme.com"
    # ... and what it writes under an encoded key is ours under the user key: "é" -> w6k
    await kv.put("w6k", b"accent")
    assert (await bucket.get("é")).value == b"accent"


async def test_every_operation_takes_and_returns_user_keys(make_bucket: BucketFactory) -> None:
    bucket = await make_bucket(history=5, key_codec=Base64KeyCodec())
    keys = ["Acme Inc.contact", "Acme Inc.phone", "ünï cødé.名前", "a b.c*d"]
    first = await bucket.create(keys[0], b"1")
    second = await bucket.update(keys[0], b"2", first)
    with pytest.raises(kvstore.WrongRevisionError) as wrong:
        await bucket.update(keys[0], b"3", first)
    assert wrong.value.key == keys[0]
    with pytest.raises(kvstore.KeyExistsError):
        await bucket.create(keys[0], b"x")
    revisions = await bucket.put_many({keys[1]: b"p", keys[2]: b"u", keys[3]: b"s"})
    assert set(revisions) == set(keys[1:])
    snapshot = await bucket.get_many([*keys, "nobody home"])
    assert {k: e.value for k, e in snapshot.items()} == {
        keys[0]: b"2",
        keys[1]: b"p",
        keys[2]: b"u",
        keys[3]: b"s",
    }
    assert [e.key for e in snapshot.values()] == keys and snapshot.missing == ("nobody home",)
    assert sorted(await bucket.keys()) == sorted(keys)
    assert sorted([k async for k in bucket.keys("Acme Inc.*")]) == keys[:2]
    assert [k async for k in bucket.keys(["ünï cødé.>", "a b.*"])] != []
    await bucket.delete(keys[1])
    await bucket.purge(keys[3])
    assert [(e.key, e.value, e.op) for e in await bucket.history(keys[0])] == [
        (keys[0], b"1", Op.PUT),
        (keys[0], b"2", Op.PUT),
    ]
    assert (await bucket.get(keys[0], revision=second)).value == b"2"
    with pytest.raises(kvstore.KeyNotFoundError) as missing:
        await bucket.get(keys[1])
    assert missing.value.key == keys[1]
    assert sorted([k async for k in bucket.keys()]) == sorted([keys[0], keys[2]])


async def test_watch_filters_are_encoded(make_bucket: BucketFactory) -> None:
    bucket = await make_bucket(key_codec=Base64KeyCodec())
    await bucket.put("orders.1 2", b"old")
    await bucket.put("other.x", b"no")
    async with bucket.watch("orders.>") as watcher:
        await bucket.put("orders.3 4", b"new")
        seen = [await anext(watcher), await anext(watcher)]
    assert [(e.key, e.value) for e in seen] == [("orders.1 2", b"old"), ("orders.3 4", b"new")]


async def test_watch_and_keys_skip_keys_the_codec_cannot_decode(
    make_bucket: BucketFactory, peer: JetStreamContext
) -> None:
    bucket = await make_bucket(key_codec=Base64KeyCodec())
    kv = await peer.key_value(bucket.name)
    await kv.put("plain.key", b"?")  # "plain" is 5 chars: 1 mod 4, never base64
    await bucket.put("mine", b"ok")
    assert [k async for k in bucket.keys()] == ["mine"]
    async with bucket.watch() as watcher:
        entry = await asyncio.wait_for(anext(watcher), 10)
        assert entry.key == "mine"
        await kv.put("plain.key", b"again")  # not delivered, and the watch goes on
        await bucket.put("mine", b"still")
        entry = await asyncio.wait_for(anext(watcher), 10)
    assert (entry.key, entry.value) == ("mine", b"still")


async def test_path_codec_keys_and_filters(
    js: jetstream.JetStream, make_bucket: BucketFactory
) -> None:
    bucket = await make_bucket(key_codec=PathKeyCodec())
    await bucket.put("/etc/hosts", b"h")
    await bucket.put("config/app/db", b"d")
    await bucket.put("config/app/", b"a")  # orbit drops the trailing slash: key "config/app"
    assert sorted(await _subjects(js, bucket)) == sorted(
        [f"$KV.{bucket.name}.{s}" for s in ("_root_.etc.hosts", "config.app.db", "config.app")]
    )
    assert sorted([k async for k in bucket.keys()]) == ["/etc/hosts", "config/app", "config/app/db"]
    assert [k async for k in bucket.keys("/>")] == ["/etc/hosts"]
    assert [k async for k in bucket.keys("config/*/db")] == ["config/app/db"]
    assert (await bucket.get("config/app")).value == b"a"


async def test_chain_codec_on_the_wire(js: jetstream.JetStream, make_bucket: BucketFactory) -> None:
    bucket = await make_bucket(key_codec=ChainKeyCodec(PathKeyCodec(), Base64KeyCodec()))
    await bucket.put("/a/b", b"v")
    assert await _subjects(js, bucket) == [f"$KV.{bucket.name}.X3Jvb3Rf.YQ.Yg"]
    assert [k async for k in bucket.keys("/a/*")] == ["/a/b"]


async def test_bad_keys_and_filters_are_refused_before_anything_is_written(
    js: jetstream.JetStream, make_bucket: BucketFactory
) -> None:
    bucket = await make_bucket(key_codec=Base64KeyCodec())
    for key in ["", "a..b", ".a", "x" * 5000]:
        with pytest.raises(kvstore.InvalidKeyError):
            await bucket.put(key, b"v")
    with pytest.raises(kvstore.InvalidKeyError):
        await bucket.put_many({"good": b"1", "bad..key": b"2"})
    with pytest.raises(kvstore.InvalidKeyError):
        bucket.watch("a.>.b")
    path = await kvstore.open_bucket(js, bucket.name, key_codec=PathKeyCodec())
    for key in ["a.b", "_root_/x", "a//b"]:
        with pytest.raises(kvstore.InvalidKeyError):
            await path.put(key, b"v")
    with pytest.raises(jetstream.ClientValidationError):
        await kvstore.open_bucket(js, bucket.name, key_codec="base64")  # type: ignore[arg-type]
    assert await _subjects(js, bucket) == []


class _Upper:
    """A custom codec without encode_filter, whose decode fails its own way on digits."""

    def encode_key(self, key: str) -> str:
        return key.upper()

    def decode_key(self, stored: str) -> str:
        if any(c.isdigit() for c in stored):
            raise ValueError("no digits")
        return stored.lower()


async def test_wildcards_need_a_filterable_codec(
    js: jetstream.JetStream, make_bucket: BucketFactory
) -> None:
    bucket = await make_bucket(key_codec=_Upper())
    await bucket.put("a.b", b"v")
    assert [k async for k in bucket.keys("a.b")] == ["a.b"]
    with pytest.raises(kvstore.FilterNotSupportedError):
        bucket.keys("a.*")
    with pytest.raises(kvstore.FilterNotSupportedError):
        bucket.watch("a.>")
    assert (await bucket.get("a.b")).key == "a.b"
    assert "A.B" in (await _subjects(js, bucket))[0]
    await bucket.put("n1", b"digits")  # stored "N1", which this codec cannot decode
    assert [k async for k in bucket.keys()] == ["a.b"]  # skipped, not a raw ValueError
    with pytest.raises(kvstore.KeyDecodeError) as error:
        await bucket.get("n1")
    assert isinstance(error.value.__cause__, ValueError) and error.value.subject == "N1"


class _Reverse:
    """A toy value stage: bytes reversed, bound to bucket and stored key by a header."""

    def seal(self, value: bytes, context: ValueContext) -> bytes:
        context.headers["X-Bound"] = f"{context.bucket}/{context.key}"
        return value[::-1]

    def open(self, value: bytes, context: ValueContext) -> bytes:
        if context.headers.get("X-Bound") != f"{context.bucket}/{context.key}":
            raise jetstream.JetStreamError(f"value moved: revision {context.revision}")
        return value[::-1]


async def test_value_stages_see_bucket_stored_key_and_headers(
    js: jetstream.JetStream, make_bucket: BucketFactory
) -> None:
    """The seam encryption will use: every value path seals and opens, tombstones stay plain,
    and the typed view sits on top."""
    plain = await make_bucket(history=5, key_codec=Base64KeyCodec())
    bucket = kvstore.Bucket(
        js, plain.name, plain.config, key_codec=Base64KeyCodec(), value_stages=[_Reverse()]
    )
    await bucket.put("a b", b"123")
    await bucket.put_many({"c d": b"456", "e": b"789"})
    async with bucket.batch() as batch:
        batch.put("f", b"abc")
        batch.delete("e")
    stored = await plain.get("a b")
    assert stored.value == b"321"  # sealed on the wire
    assert (await bucket.get("a b")).value == b"123"
    snapshot = await bucket.get_many(["a b", "c d", "f"])
    assert {k: e.value for k, e in snapshot.items()} == {"a b": b"123", "c d": b"456", "f": b"abc"}
    history = [(e.op, e.value) async for e in bucket.history("e")]
    assert history == [(Op.PUT, b"789"), (Op.DELETE, b"")]  # the tombstone was not sealed
    async with bucket.watch(["a b", "c d"]) as watcher:
        seen = {(await anext(watcher)).value for _ in range(2)}
    assert seen == {b"123", b"456"}
    async with bucket.watch("a b", meta_only=True) as watcher:
        assert (await anext(watcher)).value == b""  # headers only: nothing to open
    numbers = bucket.typed(int)
    await numbers.put("n", 42)
    assert (await plain.get("n")).value == b"24" and (await numbers.get("n")).value == 42
