"""Readers whose object goes away under them (deleted, replaced, its chunks purged under an
unchanged meta record) or whose server stays down end with a typed error in bounded time
(``stall_timeout``, checked when given), never with wrong bytes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

import jetstream
import objstore

BIG_CHUNKS = 96  # 12 MiB in 128 KiB chunks: more than the reader's 8 MiB window


async def _big_object(store: objstore.ObjectStore, name: str) -> objstore.ObjectInfo:
    chunk = objstore.DEFAULT_CHUNK_SIZE
    return await store.put(name, b"".join(bytes([i]) * chunk for i in range(BIG_CHUNKS)))


@pytest.mark.parametrize("change", ["delete", "replace"])
async def test_slow_reader_sees_its_object_go(
    js: jetstream.JetStream, unique_name: Callable[[str], str], change: str
) -> None:
    store = await objstore.create_store(js, unique_name("slow"))
    await _big_object(store, "big")
    loop = asyncio.get_running_loop()
    async with store.open("big", stall_timeout=20.0) as reader:
        received = 0
        with pytest.raises(objstore.ObjectNotFoundError, match="big"):
            async for _chunk in reader:
                received += 1
                if received == 10:
                    if change == "delete":
                        await store.delete("big")
                    else:
                        await store.put("big", b"new content")
                    changed_at = loop.time()
                await asyncio.sleep(0)  # a slow consumer
    assert 10 <= received < BIG_CHUNKS
    assert loop.time() - changed_at < 10.0, "noticed well before the stall timeout"
    await objstore.delete_store(js, store.name)


async def test_get_bytes_of_a_replaced_object(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    store = await objstore.create_store(js, unique_name("gb"))
    await _big_object(store, "big")
    original = store.open

    def open_then_replace(name: str, **kw: float) -> object:
        opening = original(name, **kw)

        class Replacing:
            async def __aenter__(self) -> objstore.ObjectReader:
                reader = await opening.__aenter__()
                await store.put("big", b"replaced")  # after the reader resolved the old nuid
                return reader

            async def __aexit__(self, *exc: object) -> None:
                await opening.__aexit__(*exc)

        return Replacing()

    store.open = open_then_replace  # type: ignore[method-assign,assignment]
    with pytest.raises(objstore.ObjectNotFoundError):
        await asyncio.wait_for(store.get_bytes("big"), 15)
    store.open = original  # type: ignore[method-assign]
    assert await store.get_bytes("big") == b"replaced"
    await objstore.delete_store(js, store.name)


async def _until_connected(js: jetstream.JetStream) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while not js.nc.is_connected:
        assert loop.time() < deadline, "no reconnect"
        await asyncio.sleep(0.05)


async def test_get_file_with_the_server_down_times_out(tmp_path: Path) -> None:
    server = jetstream.EmbeddedServer(store_dir=tmp_path / "store")
    server.start()
    try:
        async with await jetstream.connect(
            server.url, timeout=1.0, reconnect_time_wait=0.2, max_reconnect_attempts=-1
        ) as js:
            store = await objstore.create_store(js, "down")
            await _big_object(store, "big")
            target = tmp_path / "big.bin"
            loop = asyncio.get_running_loop()
            killed_at: list[float] = []

            def progress(done: int, total: int | None) -> None:
                if not killed_at:
                    server.kill()
                    killed_at.append(loop.time())

            with pytest.raises(jetstream.RequestTimeoutError, match="stall_timeout"):
                await asyncio.wait_for(
                    store.get_file("big", target, progress=progress, stall_timeout=3.0), 30
                )
            assert killed_at and loop.time() - killed_at[0] < 10.0, "within the bound"
            leftovers = await asyncio.to_thread(lambda: sorted(tmp_path.glob("*big.bin*")))
            assert leftovers == [], "no file and no temporary file left by the call"
            await asyncio.to_thread(server.start)  # leave the context connected
            await _until_connected(js)
    finally:
        server.close()


async def test_chunks_purged_under_an_unchanged_meta_is_a_digest_mismatch(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    store = await objstore.create_store(js, unique_name("gone"))
    info = await _big_object(store, "big")
    loop = asyncio.get_running_loop()
    async with store.open("big") as reader:
        with pytest.raises(objstore.DigestMismatchError, match="chunks missing"):
            async for _chunk in reader:
                if reader._received == 5:
                    subject = f"$O.{store.name}.C.{info.nuid}"
                    await js.purge_stream(store.stream, subject=subject)
                    purged_at = loop.time()
    assert loop.time() - purged_at < 10.0
    await objstore.delete_store(js, store.name)


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), True, "5"])
async def test_stall_timeout_is_validated(
    js: jetstream.JetStream, unique_name: Callable[[str], str], bad: object
) -> None:
    store = objstore.ObjectStore(js, unique_name("v"))  # nothing is sent
    with pytest.raises(jetstream.ClientValidationError, match="stall_timeout"):
        store.open("x", stall_timeout=bad)  # type: ignore[arg-type]
    with pytest.raises(jetstream.ClientValidationError, match="stall_timeout"):
        await store.get_bytes("x", stall_timeout=bad)  # type: ignore[arg-type]
