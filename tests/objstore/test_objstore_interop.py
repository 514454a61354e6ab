"""Wire compatibility with nats-py's built-in object store, both ways, links included."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime

import nats
import pytest
from nats.js import JetStreamContext

import jetstream
import objstore

CHUNK = objstore.DEFAULT_CHUNK_SIZE


async def test_nats_py_reads_what_we_store(
    js: jetstream.JetStream, peer: JetStreamContext, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("ours")
    store = await objstore.create_store(js, name)
    data = os.urandom(3 * CHUNK + 11)
    put = await store.put("model.bin", data, description="a model", meta={"v": "1"})
    await store.put("empty", b"")
    await store.add_link("latest", "model.bin")
    obs = await peer.object_store(name)
    result = await obs.get("model.bin")
    assert result.data == data, "nats-py verified our digest and chunks"
    assert result.info.size == len(data) and result.info.description == "a model"
    assert datetime.fromisoformat(result.info.mtime) == put.mtime  # RFC 3339, UTC
    assert (await store.info("model.bin")).mtime == put.mtime
    assert (await obs.get("empty")).data == b""
    assert (await obs.get("latest")).data == data, "nats-py follows our links"
    assert sorted(i.name for i in await obs.list()) == ["empty", "latest", "model.bin"]
    await store.delete("empty")
    with pytest.raises(nats.js.errors.ObjectNotFoundError):
        await obs.get("empty")
    await objstore.delete_store(js, name)


async def test_we_read_what_nats_py_stores(
    js: jetstream.JetStream, peer: JetStreamContext, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("peer")
    obs = await peer.create_object_store(name)
    data = os.urandom(2 * CHUNK + 5)
    await obs.put("from-nats-py", data)
    before = datetime.now(UTC)
    await obs.put("small", b"hello")  # mtime: isoformat() with "+00:00"
    store = await objstore.open_store(js, name)  # no allow_direct, no fast ingest
    assert await store.get_bytes("from-nats-py") == data
    small = await store.info("small")
    assert small.size == 5
    assert small.mtime is not None and before <= small.mtime <= datetime.now(UTC)
    assert sorted([i.name async for i in store.list()]) == ["from-nats-py", "small"]
    await store.add_link("alias", "small")  # a plain meta write works on their store
    assert await store.get_bytes("alias") == b"hello"
    assert (await obs.get("alias")).data == b"hello"
    await obs.delete("small")
    with pytest.raises(objstore.ObjectNotFoundError):
        await store.get_bytes("small")
    await store.put("ours", b"x")  # no allow_batched: acked publishes instead of fast ingest
    assert (await obs.get("ours")).data == b"x"
    await peer.delete_object_store(name)


async def test_nats_py_writes_into_our_store(
    js: jetstream.JetStream, peer: JetStreamContext, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("mixed")
    store = await objstore.create_store(js, name)
    obs = await peer.object_store(name)
    await obs.put("theirs", b"T" * (CHUNK + 1))
    await store.put("ours", b"O")
    assert await store.get_bytes("theirs") == b"T" * (CHUNK + 1)
    assert (await obs.get("ours")).data == b"O"
    await objstore.delete_store(js, name)
