"""docs/CODECS.md's way to move a bucket of the older key-name format (v1, names equal in every
bucket sharing a ring) to the bucket-bound format (v2) runs as written: every live key and
value arrives in the new bucket, under names of the new format."""

from __future__ import annotations

import contextlib
from pathlib import Path

import msgspec
from nats.js import JetStreamContext

import jetstream
import kvstore
from kvstore._models import stream_config_for_bucket
from tests.peer_reads import peer_keys
from tests.readme import python_blocks, run_fragment

CODECS = Path(__file__).parents[2] / "docs" / "CODECS.md"
RING = jetstream.Keyring({"a": bytes(range(32))}, primary="a")


async def test_the_documented_copy_moves_a_v1_bucket_to_bucket_bound_names(
    js: jetstream.JetStream, peer: JetStreamContext
) -> None:
    (block,) = [b for b in python_blocks(CODECS) if b.heading.startswith("Key-name formats")]
    # "legacy" as an older jetstore made it (no format record) and filled it (v1 names).
    stream = stream_config_for_bucket("legacy", kvstore.BucketConfig(history=3), allow_atomic=True)
    await js.add_stream(msgspec.structs.replace(stream, metadata=None))
    codec = kvstore.EncryptedKeyCodec(RING)
    v1 = codec.for_bucket("legacy", version=1)
    writer = await kvstore.open_bucket(js, "legacy", key_codec=codec, encryption=RING)
    await writer.put_many({"customers.alice": b"a@x", "customers.bob": b"b@x", "gone": b"-"})
    await writer.delete("gone")
    try:
        await run_fragment(block, {"js": js, "kvstore": kvstore, "ring": RING})
        current = await kvstore.open_bucket(js, "current", key_codec=codec, encryption=RING)
        snapshot = await current.get_many([k async for k in current.keys()])
        assert {k: e.value for k, e in snapshot.items()} == {
            "customers.alice": b"a@x",
            "customers.bob": b"b@x",
        }
        assert current.config.history == 3
        kv = await peer.key_value("current")
        stored = await peer_keys(kv)
        assert v1.encode_key("customers.alice") not in stored and len(stored) == 2
    finally:
        for name in ("legacy", "current"):
            with contextlib.suppress(kvstore.BucketNotFoundError):
                await kvstore.delete_bucket(js, name)
