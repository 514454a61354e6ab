"""Buckets whose key names are encrypted (EncryptedKeyCodec) on a real server: every operation
and token-wise filter works with the user's keys, while the server, the stream and a nats-py
peer see only sealed names."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgspec
import pytest
from nats.js import JetStreamContext

import jetstream
import kvstore
from jetstream._consume.scan import scan_stream
from kvstore._models import stream_config_for_bucket
from tests.conftest import BucketFactory
from tests.peer_reads import peer_keys

RING = jetstream.Keyring({"k1": jetstream.Keyring.new_key()}, primary="k1")


async def test_names_and_values_sealed_every_operation_works(
    js: jetstream.JetStream, make_bucket: BucketFactory
) -> None:
    bucket = await make_bucket(key_codec=kvstore.EncryptedKeyCodec(RING), encryption=RING)
    revision = await bucket.put("customers.alice.email", b"alice@example.com")
    await bucket.update("customers.alice.email", b"a@example.com", revision)
    await bucket.create("customers.bob.email", b"bob@example.com")
    await bucket.put_many({"customers.carol.email": b"c@x", "orders.1": b"o"})
    await bucket.delete("orders.1")
    assert (await bucket.get("customers.alice.email")).value == b"a@example.com"
    assert sorted([k async for k in bucket.keys("customers.*.email")]) == [
        "customers.alice.email",
        "customers.bob.email",
        "customers.carol.email",
    ]
    snapshot = await bucket.get_many(["customers.bob.email", "orders.1"])
    assert snapshot["customers.bob.email"].value == b"bob@example.com"
    assert snapshot.missing == ("orders.1",)
    subjects = [m.subject async for m in scan_stream(js, bucket.stream, [">"])]
    stored = " ".join(subjects)
    for word in ("customers", "alice", "bob", "carol", "email", "orders"):
        assert word not in stored


async def test_a_watch_filters_by_sealed_tokens(make_bucket: BucketFactory) -> None:
    bucket = await make_bucket(key_codec=kvstore.EncryptedKeyCodec(RING))
    await bucket.put("eu.paris", b"1")
    await bucket.put("us.nyc", b"2")
    async with bucket.watch("eu.>") as watcher:
        await bucket.put("eu.rome", b"3")
        seen = [await asyncio.wait_for(anext(watcher), 10) for _ in range(2)]
    assert [(e.key, e.value) for e in seen] == [("eu.paris", b"1"), ("eu.rome", b"3")]


async def test_a_peer_sees_sealed_names_and_its_plain_keys_are_skipped(
    make_bucket: BucketFactory, peer: JetStreamContext
) -> None:
    bucket = await make_bucket(key_codec=kvstore.EncryptedKeyCodec(RING))
    await bucket.put("secret.name", b"v")
    kv = await peer.key_value(bucket.name)
    stored = await peer_keys(kv)
    assert len(stored) == 1 and "secret" not in stored[0]
    assert (await kv.get(stored[0])).value == b"v"  # the peer reads it by its sealed name
    await kv.put("plain.key", b"?")
    assert [k async for k in bucket.keys()] == ["secret.name"]


async def _stored_keys(js: jetstream.JetStream, bucket: kvstore.Bucket) -> list[str]:
    prefix = f"$KV.{bucket.name}."
    subjects = [m.subject async for m in scan_stream(js, bucket.stream, [f"{prefix}>"])]
    return [subject.removeprefix(prefix) for subject in subjects]


@pytest.mark.parametrize(
    ("codec", "key"),
    [
        (kvstore.EncryptedKeyCodec(RING), "customers.alice"),
        (kvstore.ChainKeyCodec(kvstore.PathKeyCodec(), kvstore.EncryptedKeyCodec(RING)), "/c/a"),
    ],
    ids=["alone", "chained"],
)
async def test_buckets_sharing_a_ring_store_a_key_under_unrelated_names(
    js: jetstream.JetStream,
    make_bucket: BucketFactory,
    peer: JetStreamContext,
    codec: kvstore.KeyCodec,
    key: str,
) -> None:
    first, second = await make_bucket(key_codec=codec), await make_bucket(key_codec=codec)
    await first.put(key, b"1")
    await second.put(key, b"2")
    (in_first,), (in_second,) = await _stored_keys(js, first), await _stored_keys(js, second)
    assert not set(in_first.split(".")) & set(in_second.split("."))
    # A name copied into the other bucket is no key there (skipped, as a peer's plain key).
    await peer.publish(f"$KV.{second.name}.{in_first}", b"copied")
    assert [k async for k in second.keys()] == [key]
    assert (await second.get(key)).value == b"2"


# Bucket "legacy" of docs/CODECS.md: a bucket made before names were bound to their bucket,
# whose key "customers.alice.email" was stored by EncryptedKeyCodec(LEGACY_RING) as:
LEGACY_RING = jetstream.Keyring({"a": bytes(range(32))}, primary="a")
V1_NAME = (
    "YsZ5oh4zRDQPygOsshf_lMlvK7aabiIMgA.YRC2QLQbKg4qF2jOjCGuq-OBu0GL.kOf536lsLcf950MYnona3pCsN6aA"
)


async def _legacy_bucket(js: jetstream.JetStream, name: str, peer: JetStreamContext) -> None:
    """A bucket as an older jetstore made it (no name-format record), with one v1 name."""
    config = kvstore.BucketConfig(history=5)
    stream = stream_config_for_bucket(name, config, allow_atomic=True)
    await js.add_stream(msgspec.structs.replace(stream, metadata=None))
    await peer.publish(f"$KV.{name}.{V1_NAME}", b"alice@example.com")


async def test_a_bucket_made_before_keeps_its_names_and_a_new_one_binds_them(
    js: jetstream.JetStream,
    make_bucket: BucketFactory,
    peer: JetStreamContext,
    unique_name: Callable[[str], str],
) -> None:
    codec = kvstore.EncryptedKeyCodec(LEGACY_RING)
    name = unique_name("legacy")
    await _legacy_bucket(js, name, peer)
    try:
        # Created again with the same configuration: returned as it is (no BucketExistsError).
        old = await kvstore.create_bucket(js, name, history=5, key_codec=codec)
        assert (await old.get("customers.alice.email")).value == b"alice@example.com"
        await old.put("customers.alice.email", b"a@example.com")
        await old.put("customers.bob.email", b"b@example.com")
        assert sorted([k async for k in old.keys("customers.*.email")]) == [
            "customers.alice.email",
            "customers.bob.email",
        ]
        assert V1_NAME in await _stored_keys(js, old) and len(await _stored_keys(js, old)) == 2
        reopened = await kvstore.open_bucket(js, name, key_codec=codec)
        assert (await reopened.get("customers.alice.email")).value == b"a@example.com"
    finally:
        await kvstore.delete_bucket(js, name)
    new = await make_bucket(history=5, key_codec=codec)
    await new.put("customers.alice.email", b"x")
    await kvstore.update_bucket(js, new.name, history=3)  # keeps the bucket's name format
    updated = await kvstore.open_bucket(js, new.name, key_codec=codec)
    await updated.put("customers.alice.email", b"y")
    (stored,) = await _stored_keys(js, new)
    assert stored != V1_NAME and (await updated.get("customers.alice.email")).value == b"y"
    assert updated.config.metadata == {}, "the record is no user metadata"


async def test_a_name_format_this_version_does_not_know_is_refused_not_guessed(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("future")
    stream = stream_config_for_bucket(name, kvstore.BucketConfig(), allow_atomic=True)
    metadata = {"jetstore.key_name_format": "v9"}  # what a newer jetstore might record
    await js.add_stream(msgspec.structs.replace(stream, metadata=metadata))
    try:
        with pytest.raises(jetstream.JetStreamError, match="'v9'"):
            await kvstore.open_bucket(js, name, key_codec=kvstore.EncryptedKeyCodec(RING))
        plain = await kvstore.open_bucket(js, name)  # names it does not seal: no matter
        assert plain.config.metadata == {}
    finally:
        await kvstore.delete_bucket(js, name)
    with pytest.raises(jetstream.InvalidBucketConfigError, match="reserved"):
        kvstore.BucketConfig(metadata={"jetstore.key_name_format": "v1"})
