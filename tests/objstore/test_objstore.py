"""Object store on a real server: round trips, sources, digests, TTL, links, meta, watch,
cleanup, parallel uploads, and bad input."""

from __future__ import annotations

import asyncio
import base64
import io
import os
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path

import msgspec
import pytest

import jetstream
import objstore
from jetstream._options import ConnectionOptions
from objstore import ObjectStore

CHUNK = objstore.DEFAULT_CHUNK_SIZE


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, 3 * CHUNK, 3 * CHUNK + 7])
async def test_round_trip(store: ObjectStore, size: int) -> None:
    data = os.urandom(size)
    info = await store.put("obj", data)
    assert (info.size, info.chunks) == (size, -(-size // CHUNK))
    assert info.digest.startswith("SHA-256=")
    assert await store.get_bytes("obj") == data
    assert (await store.info("obj")).nuid == info.nuid


async def test_every_kind_of_source(store: ObjectStore, tmp_path: Path) -> None:
    data = os.urandom(2 * CHUNK + 100)
    path = tmp_path / "src.bin"
    path.write_bytes(data)

    async def agen() -> AsyncIterator[bytes]:
        for i in range(0, len(data), 1000):
            yield data[i : i + 1000]

    sources: dict[str, object] = {
        "bytes": data,
        "bytearray": bytearray(data),
        "memoryview": memoryview(data),
        "str path": str(path),
        "pathlib": path,
        "file": io.BytesIO(data),
        "iterable": [data[i : i + 5000] for i in range(0, len(data), 5000)],
        "async iterable": agen(),
    }
    for name, source in sources.items():
        await store.put(name, source)  # type: ignore[arg-type]
        assert await store.get_bytes(name) == data, name


async def test_progress_and_small_chunks(store: ObjectStore) -> None:
    seen: list[tuple[int, int | None]] = []
    info = await store.put(
        "p", b"x" * 2500, chunk_size=1000, progress=lambda d, t: seen.append((d, t))
    )
    assert info.chunks == 3 and seen == [(1000, 2500), (2000, 2500), (2500, 2500)]


async def test_get_file_and_streaming_reads(store: ObjectStore, tmp_path: Path) -> None:
    data = os.urandom(5 * CHUNK + 3)
    await store.put("f", data, meta={"kind": "test"}, description="d")
    out = tmp_path / "out.bin"
    info = await store.get_file("f", out)
    assert out.read_bytes() == data and info.metadata == {"kind": "test"}
    async with store.open("f") as reader:
        chunks = [chunk async for chunk in reader]
    assert len(chunks) == 6 and b"".join(chunks) == data
    assert not (tmp_path / "out.bin.part").exists()


async def test_a_corrupt_object_fails_its_digest(
    store: ObjectStore, js: jetstream.JetStream, tmp_path: Path
) -> None:
    info = await store.put("c", os.urandom(3 * CHUNK))
    forged = objstore.ObjectInfo(
        **{
            **{f: getattr(info, f) for f in info.__struct_fields__},
            "digest": "SHA-256=" + "A" * 43 + "=",
        }
    )
    await js.publish(  # a forged record, written as any client could
        f"$O.{store.name}.M.{base64.urlsafe_b64encode(b'c').decode()}",
        msgspec.json.encode(forged),
        headers={"Nats-Rollup": "sub"},
    )
    with pytest.raises(objstore.DigestMismatchError):
        await store.get_bytes("c")
    with pytest.raises(objstore.DigestMismatchError):
        await store.get_file("c", tmp_path / "c.bin")
    assert not (tmp_path / "c.bin").exists(), "no corrupt file is left behind"


async def test_replacing_keeps_the_old_version_until_the_new_one_is_complete(
    store: ObjectStore, js: jetstream.JetStream
) -> None:
    first = await store.put("v", os.urandom(3 * CHUNK))
    second = await store.put("v", b"new")
    assert await store.get_bytes("v") == b"new" and first.nuid != second.nuid
    with pytest.raises(jetstream.MessageNotFoundError):
        await js.get_last_message(store.stream, f"$O.{store.name}.C.{first.nuid}")


async def test_object_ttl_removes_the_whole_object(
    make_store: Callable[..., object], js: jetstream.JetStream
) -> None:
    store: ObjectStore = await make_store(marker_ttl=timedelta(seconds=1))  # type: ignore[misc]
    with pytest.raises(jetstream.InvalidTTLError, match="marker_ttl"):
        await (await make_store(marker_ttl=timedelta(seconds=5))).put("x", b"1", ttl=2)  # type: ignore[attr-defined]
    info = await store.put("short", os.urandom(2 * CHUNK), ttl=1)
    await store.put("long", b"stays")
    await asyncio.sleep(2.5)
    with pytest.raises(objstore.ObjectNotFoundError):
        await store.info("short")
    with pytest.raises(jetstream.MessageNotFoundError):
        await js.get_last_message(store.stream, f"$O.{store.name}.C.{info.nuid}")
    assert await store.get_bytes("long") == b"stays"


async def test_delete_list_meta_and_links(
    store: ObjectStore, make_store: Callable[..., object]
) -> None:
    await store.put("a", b"A")
    await store.put("b", b"B", meta={"k": "v"})
    assert sorted(i.name for i in await store.list()) == ["a", "b"]
    updated = await store.update_meta("b", new_name="c", description="moved", meta={"k": "w"})
    assert updated.name == "c" and await store.get_bytes("c") == b"B"
    with pytest.raises(objstore.ObjectNotFoundError):
        await store.info("b")
    with pytest.raises(objstore.ObjectExistsError):
        await store.update_meta("a", new_name="c")
    await store.add_link("latest", "a")
    assert await store.get_bytes("latest") == b"A"
    other: ObjectStore = await make_store()  # type: ignore[misc]
    await other.put("remote", b"R")
    await store.add_link("far", await other.info("remote"))
    assert await store.get_bytes("far") == b"R", "links across stores are followed"
    await store.add_bucket_link("whole", other)
    with pytest.raises(jetstream.ClientValidationError):
        await store.get_bytes("whole")
    with pytest.raises(objstore.ObjectExistsError):
        await store.add_link("a", "c")
    with pytest.raises(jetstream.ClientValidationError):
        await store.add_link("l2", "latest")
    await store.delete("a")
    with pytest.raises(objstore.ObjectNotFoundError):
        await store.get_bytes("a")
    assert (await store.info("a", include_deleted=True)).deleted
    names = {i.name async for i in store.list()}
    assert "a" not in names and {"c", "latest", "far", "whole"} <= names


async def test_a_listing_closed_early_has_deleted_its_consumer(
    js: jetstream.JetStream, store: ObjectStore
) -> None:
    for name in ("a", "b"):
        await store.put(name, b"x")
    listing = store.list()
    assert (await anext(listing)).name == "a"
    await listing.aclose()  # type: ignore[attr-defined]
    assert [name async for name in js.consumer_names(store.stream)] == []


async def test_watch_sees_puts_deletes_and_expiry(make_store: Callable[..., object]) -> None:
    store: ObjectStore = await make_store(marker_ttl=timedelta(seconds=1))  # type: ignore[misc]
    await store.put("before", b"1")
    events: list[objstore.ObjectInfo] = []

    async def watch() -> None:
        async for info in store.watch():
            events.append(info)
            if info.expired:
                return

    watching = asyncio.create_task(watch())
    await asyncio.sleep(0.3)
    await store.put("x", b"2")
    await store.delete("x")
    await store.put("t", b"3", ttl=1)
    await asyncio.wait_for(watching, 10)
    assert [(e.name, e.deleted, e.expired) for e in events] == [
        ("before", False, False), ("x", False, False), ("x", True, False),
        ("t", False, False), ("t", True, True),
    ]  # fmt: skip


async def test_cleanup_removes_orphan_chunks_only(
    store: ObjectStore, js: jetstream.JetStream
) -> None:
    await store.put("kept", os.urandom(2 * CHUNK))
    async with jetstream.FastPublisher(js) as orphan:  # a crashed uploader: chunks, no meta
        for _ in range(3):
            await orphan.add(f"$O.{store.name}.C.orphannuid", b"x" * 100)
    assert await store.cleanup() == 0, "recent chunks may belong to an upload in progress"
    assert await store.cleanup(older_than=timedelta(0)) == 1
    with pytest.raises(jetstream.MessageNotFoundError):
        await js.get_last_message(store.stream, f"$O.{store.name}.C.orphannuid")
    assert len(await store.get_bytes("kept")) == 2 * CHUNK


async def test_eight_parallel_uploads_succeed(store: ObjectStore) -> None:
    blobs = {f"p{i}": os.urandom(20 * CHUNK + i) for i in range(8)}
    await asyncio.gather(*(store.put(name, data) for name, data in blobs.items()))
    for name, data in blobs.items():
        assert await store.get_bytes(name) == data


async def test_store_management(js: jetstream.JetStream, unique_name: Callable[[str], str]) -> None:
    name = unique_name("mgmt")
    store = await objstore.create_store(js, name, description="d", max_age=timedelta(hours=1))
    assert (
        await objstore.create_store(js, name, description="d", max_age=timedelta(hours=1))
    ).name == name
    with pytest.raises(objstore.StoreExistsError):
        await objstore.create_store(js, name, description="other")
    assert name in await objstore.list_stores(js)
    status = await (await objstore.open_store(js, name)).status()
    assert status.config.max_age == timedelta(hours=1) and not status.sealed
    await store.put("x", b"1")
    await store.seal()
    assert (await store.status()).sealed
    with pytest.raises(objstore.UploadFailedError):
        await store.put("y", b"2")
    await objstore.delete_store(js, name)
    with pytest.raises(objstore.StoreNotFoundError):
        await objstore.open_store(js, name)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda s: s.put("", b"x"), objstore.InvalidObjectNameError),
        (lambda s: s.put(7, b"x"), objstore.InvalidObjectNameError),
        (lambda s: s.put("x", 12345), TypeError),
        (lambda s: s.put("x", b"x", ttl="500ms"), jetstream.InvalidTTLError),
        (lambda s: s.put("x", b"x", chunk_size=0), jetstream.ClientValidationError),
        (lambda s: s.put("x", b"x", meta={"k": 1}), jetstream.ClientValidationError),
        (lambda s: s.put("x", "/no/such/file"), FileNotFoundError),
        (lambda s: s.put("x", ["text"]), objstore.UploadFailedError),
        (lambda s: s.get_bytes("missing"), objstore.ObjectNotFoundError),
        (lambda s: s.delete("missing"), objstore.ObjectNotFoundError),
    ],
)
async def test_bad_input(
    store: ObjectStore, call: Callable[[ObjectStore], object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        await call(store)  # type: ignore[misc]
    assert [i async for i in store.list()] == []
    assert (await store.status()).stream_info.state.messages == 0, "nothing was stored"


async def test_bad_store_names_and_configs(js: jetstream.JetStream) -> None:
    for name in ["", "a.b", "a b", "a*"]:
        with pytest.raises(jetstream.InvalidBucketNameError):
            await objstore.create_store(js, name)
    for options in (
        {"max_age": timedelta(0)},
        {"replicas": 9},
        {"marker_ttl": timedelta(milliseconds=5)},
    ):
        with pytest.raises(jetstream.InvalidBucketConfigError):
            await objstore.create_store(js, "fine", **options)


async def test_upload_many_needs_some_concurrency(nats_server: jetstream.EmbeddedServer) -> None:
    from objstore._many import UploadItem, upload_many

    options = ConnectionOptions.from_strings({"servers": nats_server.url})
    with pytest.raises(jetstream.ClientValidationError, match="concurrency"):
        await upload_many(options, "any", [UploadItem("a", data=b"x")], concurrency=0)


async def test_a_name_too_long_for_its_record_is_refused_before_anything_is_read(
    store: ObjectStore, js: jetstream.JetStream
) -> None:
    """helper-38: a name whose record subject passes the control-line limit was refused only
    at the commit, after the whole object was read and sent."""
    read = 0

    async def source() -> AsyncIterator[bytes]:
        nonlocal read
        for _ in range(4):
            read += 1
            yield b"z" * 1024 * 1024

    with pytest.raises(objstore.InvalidObjectNameError, match="too long"):
        await store.put("n" * 3100, source())
    assert read == 0
    assert (await js.stream_info(store.stream)).state.messages == 0


async def test_a_put_ending_before_its_first_chunk_closes_the_file_it_opened(
    store: ObjectStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """helper-38: a path source's file is opened at once (so a missing file fails at once);
    a put cancelled or failing before its first chunk left it open for the garbage collector
    (a ResourceWarning, an error under this suite's warning filter)."""
    import gc

    import objstore._upload

    path = tmp_path / "f"
    path.write_bytes(b"q" * 100_000)
    opened: list[io.BufferedReader] = []
    real_open = open

    def tracking_open(*args: object, **kwargs: object) -> io.BufferedReader:
        file = real_open(*args, **kwargs)  # type: ignore[call-overload]
        opened.append(file)
        return file  # type: ignore[no-any-return]

    async def never_answers(*args: object, **kwargs: object) -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr("builtins.open", tracking_open)
    monkeypatch.setattr(objstore._upload, "read_record", never_answers)
    task = asyncio.ensure_future(store.put("o", str(path)))
    while not opened:
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert opened[0].closed, "closed by the put, not left to the garbage collector"
    del task
    gc.collect()
