"""A peer with publish rights may store messages on *literal* subjects with wildcard tokens (the
server accepts ``$KV.b.t.>`` and ``$O.s.C.*`` as publish subjects and stores them as they
are); used as a purge filter, such a subject would cover every key or chunk it matches: no
compaction or cleanup ever purges with one."""

from __future__ import annotations

from datetime import timedelta

import pytest
from nats.js import JetStreamContext

import kvstore
from objstore import ObjectStore


@pytest.mark.parametrize("wildcard", [">", "*"])
async def test_cleanup_never_purges_a_chunk_subject_with_a_wildcard(
    store: ObjectStore, peer: JetStreamContext, wildcard: str
) -> None:
    data = b"honest" * 1000
    await store.put("honest.bin", data)
    await peer.publish(f"$O.{store.name}.C.{wildcard}", b"planted")  # stored as is
    assert await store.cleanup(older_than=timedelta(0)) == 0
    assert await store.get_bytes("honest.bin") == data, "cleanup purged every chunk"


@pytest.mark.parametrize("wildcard", [">", "*"])
async def test_purge_deletes_never_purges_a_key_subject_with_a_wildcard(
    bucket: kvstore.Bucket, peer: JetStreamContext, wildcard: str
) -> None:
    await bucket.put("t.live", b"kept")
    # A peer allowed to write `t.<anything>` tombstones the literal subject `t.>` (or `t.*`).
    await peer.publish(f"$KV.{bucket.name}.t.{wildcard}", b"", headers={"KV-Operation": "DEL"})
    await bucket.purge_deletes(older_than=None)
    assert (await bucket.get("t.live")).value == b"kept", "purge_deletes purged live keys"
