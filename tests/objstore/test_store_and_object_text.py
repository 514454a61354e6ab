"""A store's status and an object's info print as short summaries (as ``nats obj status`` /
``nats obj info`` show them), text another client stored escaped; ``repr()`` stays precise."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import msgspec

import objstore
from objstore import ObjectStore

WHEN = datetime(2026, 11, 23, 16, 54, 44, 123456, tzinfo=UTC)


async def test_a_store_status_prints_as_a_short_summary(store: ObjectStore) -> None:
    status = await store.status()
    info = msgspec.structs.replace(status.stream_info, created=WHEN)
    config = dataclasses.replace(status.config, max_age=timedelta(days=90), metadata={"a": "b"})
    status = dataclasses.replace(status, size=3 * 1024**2, config=config, stream_info=info)
    assert str(status) == "\n".join(
        [
            f"Object store {store.name}",
            "         size: 3.0 MiB",
            "       sealed: no",
            "      max age: 90d",
            "   marker TTL: off",
            "    max bytes: unlimited",
            "      storage: file, 1 replica",
            "  compression: off",
            "     metadata: a=b",
            f"       stream: OBJ_{store.name}",
            "      created: 2026-11-23 16:54:44 UTC",
        ]
    )
    assert repr(status).startswith(f"StoreStatus(store='{store.name}', size=3145728, ")


async def test_an_objects_info_prints_as_a_short_summary(store: ObjectStore) -> None:
    info = await store.put("m.bin", b"x" * 1000, meta={"v": "1"}, description="weights")
    info = msgspec.structs.replace(info, mtime=WHEN)
    assert str(info) == "\n".join(
        [
            f"Object m.bin in store {store.name}",
            "         size: 1000 B in 1 chunk",
            "     modified: 2026-11-23 16:54:44 UTC",
            f"       digest: {info.digest}",
            "  description: weights",
            "     metadata: v=1",
        ]
    )
    assert repr(info).startswith("ObjectInfo(name='m.bin', ")
    link = await store.add_link("latest\x1b[2J", "m.bin")
    assert str(msgspec.structs.replace(link, mtime=None)) == "\n".join(
        [
            f"Link 'latest\\x1b[2J' in store {store.name}",
            f"  target: {store.name}/m.bin",
        ]
    )
    gone = objstore.ObjectInfo(
        name="old", bucket=store.name, nuid="", size=0, chunks=0, mtime=WHEN, deleted=True
    )
    assert str(gone) == "\n".join(
        [
            f"Object old in store {store.name}",
            "    status: deleted",
            "      size: 0 B in 0 chunks",
            "  modified: 2026-11-23 16:54:44 UTC",
        ]
    )
