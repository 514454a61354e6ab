"""A watch builds each entry from the few headers that make it (``KV-Operation``,
``Nats-Marker-Reason``, ``Nats-TTL``) and leaves every other header of the stored message
unparsed: whatever else a writer put in the header block, the entry is the same as if the
whole block had been read."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from nats.js import JetStreamContext

import jetstream
import kvstore
from jetstream import headers as hdr
from kvstore import Entry, Op
from tests.conftest import BucketFactory

RING = jetstream.Keyring({"k1": bytes(range(32))}, primary="k1")


async def _entries(bucket: kvstore.Bucket) -> dict[str, Entry]:
    async with bucket.watch() as watcher:
        return {entry.key: entry async for entry in watcher.initial()}


async def test_a_header_value_naming_an_op_header_is_no_operation(
    bucket: kvstore.Bucket, peer: JetStreamContext
) -> None:
    # The names appear in the block, inside values: the entry is still a plain put.
    await peer.publish(
        f"$KV.{bucket.name}.note",
        b"v",
        headers={"X-Note": f"{hdr.KV_OPERATION}: DEL {hdr.MARKER_REASON}: MaxAge {hdr.TTL}: 5"},
    )
    entry = (await _entries(bucket))["note"]
    assert (entry.op, entry.value, entry.ttl) == (Op.PUT, b"v", None)


async def test_op_headers_among_other_headers_of_a_peer_are_read(
    bucket: kvstore.Bucket, peer: JetStreamContext
) -> None:
    await bucket.put("gone", b"v")
    await peer.publish(
        f"$KV.{bucket.name}.gone",
        b"",
        headers={"X-Trace": "x", hdr.KV_OPERATION: "DEL", "X-Other": "y"},
    )
    entry = (await _entries(bucket))["gone"]
    assert (entry.op, entry.value) == (Op.DELETE, b"")


async def test_put_many_entries_and_ttls_are_read_from_their_blocks(
    make_bucket: BucketFactory,
) -> None:
    bucket = await make_bucket(history=2, marker_ttl=timedelta(seconds=30))
    await bucket.put_many({"a": b"1", "b": b"2"})  # blocks of batch headers only
    await bucket.put("t", b"3", ttl=60)
    entries = await _entries(bucket)
    assert {k: (e.op, e.value, e.ttl) for k, e in entries.items()} == {
        "a": (Op.PUT, b"1", None),
        "b": (Op.PUT, b"2", None),
        "t": (Op.PUT, b"3", 60),
    }


async def test_an_encrypted_bucket_written_by_put_many_opens_every_value(
    make_bucket: BucketFactory,
) -> None:
    bucket = await make_bucket(encryption=RING)
    await bucket.put_many({f"k{i}": b"secret %d" % i for i in range(20)})
    entries = await asyncio.wait_for(_entries(bucket), 10)
    assert {k: e.value for k, e in entries.items()} == {
        f"k{i}": b"secret %d" % i for i in range(20)
    }
