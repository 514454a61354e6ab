"""The faster encryption paths (issue 15's cost goals) on a real server: what they store is
envelope v1 exactly (a nats-py peer reads each stored message and it opens with the v1
functions: ``Keyring.open`` with ``value_associated_data`` / ``chunk_associated_data``), and
a batch whose messages carry different headers stores each message with its own (the batch
reuses one message's encoded header lines for the next only when the headers are equal)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from datetime import timedelta

from nats.js import JetStreamContext

import jetstream
import objstore
from jetstream import Keyring
from kvstore._encryption import value_associated_data
from objstore._encryption import chunk_associated_data
from objstore._models import chunk_subject
from tests.conftest import BucketFactory

K1 = bytes(range(32))
RING = Keyring({"k1": K1}, primary="k1")
OPENER = Keyring({"k1": K1}, primary="k1")  # another ring with the same key: a reader
ENC = jetstream.headers.ENCRYPTION


async def test_put_many_stores_envelope_v1_with_each_messages_own_headers(
    make_bucket: BucketFactory, peer: JetStreamContext
) -> None:
    bucket = await make_bucket(history=5, encryption=RING, marker_ttl=timedelta(seconds=1))
    await bucket.put("c.3", b"old")
    items = {f"{group}.{i}": f"value {group}{i}".encode() for group in "abc" for i in range(4)}
    # Runs of equal headers and changes between them: plain, TTL'd, conditional.
    ttl = {"b.0": 60, "b.1": 60, "a.3": 120}
    expect = {"c.0": 0, "c.3": 1}
    revisions = await bucket.put_many(items, ttl=ttl, expect=expect)
    assert set(revisions) == set(items)
    snapshot = await bucket.get_many(items)
    assert {key: entry.value for key, entry in snapshot.items()} == items
    for key, value in items.items():
        raw = await peer.get_last_msg(bucket.stream, f"$KV.{bucket.name}.{key}")
        headers = dict(raw.headers or {})
        assert headers[ENC] == "v1;k1"
        assert value not in raw.data  # the peer sees ciphertext only
        ad = value_associated_data(bucket.name, key)
        assert OPENER.open(headers[ENC], raw.data, ad) == value
        assert headers.get("Nats-TTL") == (str(ttl[key]) if key in ttl else None)
        if key in expect:
            assert headers["Nats-Expected-Last-Subject-Sequence"] == str(expect[key])
        else:
            assert "Nats-Expected-Last-Subject-Sequence" not in headers


async def test_a_plain_atomic_batch_keeps_every_messages_headers(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("S")
    await js.add_stream(
        jetstream.StreamConfig(name=name, subjects=[f"{name}.>"], allow_atomic=True)
    )
    try:
        sent = [
            {},
            {"X-A": "1"},
            {"X-A": "1"},
            {"X-A": "café"},  # UTF-8: sized and framed by bytes
            {},
            {"X-A": "1", "X-B": "2"},
            {"X-A": "1", "X-B": "2"},
        ]
        async with jetstream.AtomicBatch(js, stream=name) as batch:
            for i, headers in enumerate(sent):
                batch.add(f"{name}.m{i}", f"data {i}".encode(), headers)
        assert batch.ack is not None and batch.ack.count == len(sent)
        for i, (headers, seq) in enumerate(zip(sent, batch.ack.sequences, strict=True)):
            raw = await js.get_message(name, seq, direct=False)  # nats-py mangles UTF-8 values
            own = {k: v for k, v in raw.headers.items() if not k.startswith("Nats-")}
            assert (raw.subject, raw.data, own) == (f"{name}.m{i}", f"data {i}".encode(), headers)
    finally:
        await js.delete_stream(name)


async def test_object_chunks_are_envelope_v1_and_the_digest_covers_them(
    js: jetstream.JetStream, unique_name: Callable[[str], str], peer: JetStreamContext
) -> None:
    name = unique_name("os")
    store = await objstore.create_store(js, name, encryption=RING)
    try:
        data = bytes(range(256)) * 40 + b"tail"  # 10 chunks of 1024 and one of 4
        info = await store.put("o", data, chunk_size=1024)
        assert info.chunks == 11
        sub = await peer.subscribe(chunk_subject(name, info.nuid), ordered_consumer=True)
        sha = hashlib.sha256()
        plain = b""
        for index in range(info.chunks):
            msg = await sub.next_msg(timeout=5)
            sha.update(msg.data)
            last = index == info.chunks - 1
            assert (msg.headers or {})[ENC] == "v1;k1"
            ad = chunk_associated_data(name, info.nuid, index, last)
            plain += OPENER.open((msg.headers or {})[ENC], msg.data, ad)
        await sub.unsubscribe()
        assert plain == data
        assert info.digest == "SHA-256=" + base64.urlsafe_b64encode(sha.digest()).decode()
        assert info.size == len(data) + 11 * 28
        assert await store.get_bytes("o") == data
    finally:
        await objstore.delete_store(js, name)
