"""Tombstones (``KV-Operation: DEL``/``PURGE``) and expiry markers (``Nats-Marker-Reason``)
carry no value, whoever wrote them: a peer's delete with a payload shows an empty value on
every read path, in plain and encrypted buckets (where that payload is not authenticated)."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
from nats.js import JetStreamContext

import jetstream
import kvstore
from jetstream import headers as hdr
from kvstore import Op
from tests.conftest import BucketFactory

RING = jetstream.Keyring({"k1": bytes(range(32))}, primary="k1")
PAYLOAD = b"peer-payload-hunter2"
# What a peer may publish on a key: tombstones as nats.go writes them (plus a payload), and
# the headers of a server marker, which any client can also send.
NOT_VALUES = {
    "deleted": ({hdr.KV_OPERATION: "DEL"}, Op.DELETE),
    "purged": ({hdr.KV_OPERATION: "PURGE", "Nats-Rollup": "sub"}, Op.PURGE),
    "marked": ({hdr.MARKER_REASON: "MaxAge"}, Op.EXPIRED),
}


@pytest.fixture(params=["plain", "encrypted"])
async def peer_written(
    request: pytest.FixtureRequest, make_bucket: BucketFactory, peer: JetStreamContext
) -> kvstore.Bucket:
    """A bucket where a peer stored a value, then a tombstone or marker with a payload, on
    each key of NOT_VALUES."""
    encryption = RING if request.param == "encrypted" else None
    bucket = await make_bucket(history=5, encryption=encryption)
    for key, (headers, _) in NOT_VALUES.items():
        await bucket.put(key, b"the value")
        await peer.publish(f"$KV.{bucket.name}.{key}", PAYLOAD, headers=headers)
    return bucket


async def test_a_watch_shows_no_value_for_a_peers_tombstone_or_marker(
    peer_written: kvstore.Bucket,
) -> None:
    async with peer_written.watch() as watcher:
        seen = [await asyncio.wait_for(anext(watcher), 10) for _ in NOT_VALUES]
    assert {e.key: (e.op, e.value) for e in seen} == {
        key: (op, b"") for key, (_, op) in NOT_VALUES.items()
    }


async def test_history_shows_no_value_for_a_peers_tombstone_or_marker(
    peer_written: kvstore.Bucket,
) -> None:
    for key, (_, op) in NOT_VALUES.items():
        entries = [e async for e in peer_written.history(key)]
        kept = [] if op is Op.PURGE else [(Op.PUT, b"the value")]  # a purge rolls the key up
        assert [(e.op, e.value) for e in entries] == [*kept, (op, b"")]


async def test_a_typed_view_and_decode_entry_show_no_value_either(
    js: jetstream.JetStream, peer_written: kvstore.Bucket
) -> None:
    typed = peer_written.typed(dict[str, int])
    async with typed.watch() as watcher:
        seen = [await asyncio.wait_for(anext(watcher), 10) for _ in NOT_VALUES]
    assert {(e.raw, e.value, e.error) for e in seen} == {(b"", None, None)}
    for key in NOT_VALUES:
        stored = await js.get_last_message(peer_written.stream, f"$KV.{peer_written.name}.{key}")
        entry = peer_written.decode_entry(
            stored.subject,
            stored.data,
            revision=stored.seq,
            created=stored.time,
            headers=stored.headers,
        )
        assert (entry.op, entry.value) == (NOT_VALUES[key][1], b"")


@pytest.mark.spark
async def test_spark_rows_of_a_peers_tombstone_or_marker_have_no_value(
    peer_written: kvstore.Bucket, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    pytest.importorskip("pyspark", reason="needs the 'spark' extra")
    from kvstore.spark import ROW_TYPE, KVDataSource

    options = {"servers": nats_server.url, "bucket": peer_written.name, "includeDeletes": "true"}
    if peer_written.encryption is not None:
        key_file = tmp_path / "keys.json"
        key = base64.b64encode(bytes(range(32))).decode()
        key_file.write_text(json.dumps({"primary": "k1", "keys": {"k1": key}}))
        options["keyFile"] = str(key_file)
    reader = KVDataSource(options).reader(ROW_TYPE)
    rows = [row for partition in reader.partitions() for row in reader.read(partition)]
    assert {key: (op, value) for key, value, _, _, op in rows} == {
        key: (op.value, b"") for key, (_, op) in NOT_VALUES.items()
    }
