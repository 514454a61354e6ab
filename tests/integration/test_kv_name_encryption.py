"""Buckets whose key names are encrypted (EncryptedKeyCodec) on a real server: every operation
and token-wise filter works with the user's keys, while the server, the stream and a nats-py
peer see only sealed names."""

from __future__ import annotations

import asyncio

from nats.js import JetStreamContext

import jetstream
import kvstore
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
    subjects = [m.subject async for m in jetstream.scan_stream(js, bucket.stream, [">"])]
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
