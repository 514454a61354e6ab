"""A handle to an object store that someone deleted: every operation fails at once with
StoreNotFoundError naming the store, whoever deleted it; an upload, a download, a listing or a
watch under way at that moment ends with it too; a link into a deleted store names that one."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from nats.js import JetStreamContext

import jetstream
import objstore
from jetstream import Keyring
from tests.conftest import StoreFactory

RING = Keyring({"k1": bytes(range(32))}, primary="k1")


async def _all(items: AsyncIterator[Any]) -> list[object]:
    return [item async for item in items]


async def _read_open(store: objstore.ObjectStore) -> bytes:
    async with store.open("o") as reader:
        return await reader.read()


async def _chunks() -> AsyncIterator[bytes]:
    for _ in range(3):
        yield b"chunk"


async def _put_file(store: objstore.ObjectStore, tmp: Path) -> object:
    source = tmp / "source.bin"
    source.write_bytes(b"from a file")
    return await store.put("new", str(source))


Operation = Callable[[objstore.ObjectStore, Path], Awaitable[object]]

OPERATIONS: dict[str, Operation] = {
    "put bytes": lambda s, _: s.put("new", b"data"),
    "put file": _put_file,
    "put iterable": lambda s, _: s.put("new", _chunks()),
    "put with ttl": lambda s, _: s.put("new", b"data", ttl=60),
    "get_bytes": lambda s, _: s.get_bytes("o"),
    "get_file": lambda s, tmp: s.get_file("o", tmp / "out.bin"),
    "open": lambda s, _: _read_open(s),
    "info": lambda s, _: s.info("o"),
    "list": lambda s, _: _all(s.list()),
    "watch": lambda s, _: anext(s.watch()),
    "delete": lambda s, _: s.delete("o"),
    "update_meta": lambda s, _: s.update_meta("o", description="changed"),
    "rename": lambda s, _: s.update_meta("o", new_name="renamed"),
    "add_link": lambda s, _: s.add_link("link", "o"),
    "add_bucket_link": lambda s, _: s.add_bucket_link("whole", s),
    "status": lambda s, _: s.status(),
    "cleanup": lambda s, _: s.cleanup(),
    "seal": lambda s, _: s.seal(),
    "rekey": lambda s, _: s.rekey(),
}

Deleter = Callable[[str], Awaitable[None]]


@pytest.fixture(params=["by us", "by a peer"])
def delete(
    request: pytest.FixtureRequest, js: jetstream.JetStream, peer: JetStreamContext
) -> Deleter:
    """Deletes a store: through objstore, or through nats-py as another client."""
    if request.param == "by us":
        return lambda name: objstore.delete_store(js, name)

    async def by_peer(name: str) -> None:
        assert await peer.delete_object_store(name)

    return by_peer


@pytest.mark.parametrize(
    ("operation", "encrypted"),
    [
        pytest.param(name, encrypted, id=f"{name}-{'encrypted' if encrypted else 'plain'}")
        for name in OPERATIONS
        for encrypted in (False, True)
        if encrypted or name != "rekey"  # rekey needs an encrypted store
    ],
)
async def test_every_operation_on_a_deleted_store_raises_store_not_found(
    make_store: StoreFactory, delete: Deleter, operation: str, encrypted: bool, tmp_path: Path
) -> None:
    store = await make_store(**({"encryption": RING} if encrypted else {}))
    await store.put("o", b"object")
    await delete(store.name)
    with pytest.raises(objstore.StoreNotFoundError) as raised:
        await OPERATIONS[operation](store, tmp_path)
    assert raised.value.store == store.name
    assert repr(store.name) in str(raised.value)
    assert raised.value.err_code == 10059
    assert not (tmp_path / "out.bin").exists()


async def test_a_store_made_by_a_peer_and_deleted_fails_uploads_with_store_not_found(
    js: jetstream.JetStream, peer: JetStreamContext, unique_name: Callable[[str], str]
) -> None:
    """Stores made by other clients upload with acked publishes instead of fast ingest."""
    name = unique_name("os")
    await peer.create_object_store(name)
    store = await objstore.open_store(js, name)
    await store.put("o", b"object")
    assert await peer.delete_object_store(name)
    with pytest.raises(objstore.StoreNotFoundError, match=name):
        await store.put("o", b"again")
    with pytest.raises(objstore.StoreNotFoundError, match=name):
        await store.get_bytes("o")


async def _slow_source(sent: asyncio.Event, resume: asyncio.Event) -> AsyncIterator[bytes]:
    for index in range(20):
        if index == 4:
            sent.set()
            await resume.wait()
        yield os.urandom(64 * 1024)


@pytest.mark.parametrize("fast_ingest", [True, False], ids=["fast ingest", "acked"])
async def test_an_upload_under_way_ends_with_store_not_found_when_the_store_is_deleted(
    make_store: StoreFactory, delete: Deleter, fast_ingest: bool
) -> None:
    """Not UploadFailedError around a 503: the store is gone, and says so."""
    store = await make_store()
    if not fast_ingest:
        store._core.batched = False  # as for a store another client made
    sent, resume = asyncio.Event(), asyncio.Event()
    upload = asyncio.create_task(store.put("o", _slow_source(sent, resume), chunk_size=64 * 1024))
    await sent.wait()
    await delete(store.name)
    resume.set()
    with pytest.raises(objstore.StoreNotFoundError, match=store.name):
        await upload


async def test_a_download_under_way_ends_with_store_not_found_when_the_store_is_deleted(
    make_store: StoreFactory, delete: Deleter
) -> None:
    store = await make_store()
    await store.put("o", os.urandom(16 * 1024 * 1024), chunk_size=64 * 1024)
    async with store.open("o") as reader:
        assert await anext(reader)
        await delete(store.name)
        with pytest.raises(objstore.StoreNotFoundError, match=store.name):
            async for _ in reader:
                pass


async def test_a_watch_under_way_ends_with_store_not_found_when_the_store_is_deleted(
    make_store: StoreFactory, delete: Deleter
) -> None:
    store = await make_store()
    await store.put("o", b"object")
    watch = store.watch()
    assert (await anext(watch)).name == "o"
    await delete(store.name)
    with pytest.raises(objstore.StoreNotFoundError, match=store.name):
        await anext(watch)


async def test_a_listing_under_way_ends_with_store_not_found_when_the_store_is_deleted(
    make_store: StoreFactory, delete: Deleter
) -> None:
    """list() reads the meta records 500 at a time: deleted after the first, it ends."""
    store = await make_store()
    limit = asyncio.Semaphore(32)

    async def put(index: int) -> None:
        async with limit:
            await store.put(f"o{index:04}", b"")

    await asyncio.gather(*(put(i) for i in range(1200)))
    listing = store.list()
    assert await anext(listing)
    await delete(store.name)
    with pytest.raises(objstore.StoreNotFoundError, match=store.name):
        async for _ in listing:
            pass


async def test_a_link_into_a_deleted_store_names_that_store(
    make_store: StoreFactory, js: jetstream.JetStream
) -> None:
    here, there = await make_store(), await make_store()
    await here.add_link("link", await there.put("o", b"object"))
    await objstore.delete_store(js, there.name)
    with pytest.raises(objstore.StoreNotFoundError) as raised:
        await here.get_bytes("link")
    assert raised.value.store == there.name
