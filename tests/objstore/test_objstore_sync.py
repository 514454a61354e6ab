"""objstore.sync, the blocking twin of the object store API, on a real server: each call does
what its async twin does and raises the same error classes; ``list()`` / ``watch()`` / a read
left early delete their consumers; encryption works the same; a plain iterable source is read
off the loop (it may block, or read another object with the blocking API)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import jetstream
import jetstream.sync
import objstore
import objstore.sync
from jetstream import ClientValidationError, Keyring, UnknownKeyIdError, WrongTypeError
from objstore._models import chunk_subject
from objstore._pulled_source import pulled_in_threads

DATA = bytes(range(256)) * 40  # 10 KiB: 10 chunks of 1 KiB with chunk_size=1024


@pytest.fixture
def bjs(nats_server: jetstream.EmbeddedServer) -> Iterator[jetstream.sync.JetStream]:
    with jetstream.sync.connect(nats_server.url) as js:
        yield js


StoreMaker = Callable[..., objstore.sync.ObjectStore]


@pytest.fixture
def make_store(
    bjs: jetstream.sync.JetStream, unique_name: Callable[[str], str]
) -> Iterator[StoreMaker]:
    """Blocking stores with unique names, deleted when the test ends."""
    names: list[str] = []

    def make(**options: object) -> objstore.sync.ObjectStore:
        names.append(unique_name("os"))
        return objstore.sync.create_store(bjs, names[-1], **options)  # type: ignore[arg-type]

    yield make
    for name in names:
        with contextlib.suppress(objstore.StoreNotFoundError):
            objstore.sync.delete_store(bjs, name)


def test_objects_round_trip_through_every_blocking_call(
    bjs: jetstream.sync.JetStream, make_store: StoreMaker, tmp_path: Path
) -> None:
    store = make_store(description="blocking")
    assert store.js is bjs and store.stream == f"OBJ_{store.name}" and store.encryption is None
    assert store.name in set(objstore.sync.list_stores(bjs))
    assert objstore.sync.open_store(bjs, store.name).name == store.name
    assert objstore.sync.update_store(bjs, store.name, description="changed").name == store.name
    assert store.status().config.description == "changed"

    source = tmp_path / "source.bin"
    source.write_bytes(DATA)
    seen: list[tuple[int, int | None]] = []
    info = store.put(
        "a", DATA, meta={"k": "v"}, chunk_size=1024, progress=lambda *p: seen.append(p)
    )
    assert (info.size, info.chunks, info.metadata) == (len(DATA), 10, {"k": "v"})
    assert seen[-1] == (len(DATA), len(DATA))
    assert store.put("from-path", str(source)).size == len(DATA)
    with source.open("rb") as file:
        assert store.put("from-file", file).size == len(DATA)
    assert store.put("from-pieces", [DATA[:100], DATA[100:]]).size == len(DATA)

    with store.open("a") as reader:
        assert reader.info.name == "a"
        assert b"".join(reader) == DATA  # 10 chunks, then the digest checked
    with store.open("a") as reader:
        assert reader.read() == DATA
    assert store.get_bytes("from-pieces") == DATA
    target = tmp_path / "out.bin"
    assert store.get_file("from-path", target).size == len(DATA)
    assert target.read_bytes() == DATA

    assert store.update_meta("a", new_name="b", description="moved").name == "b"
    assert store.info("b").description == "moved"
    assert store.add_link("to-b", "b").is_link
    assert store.get_bytes("to-b") == DATA
    other = make_store()
    assert store.add_bucket_link("to-other", other).is_link
    store.delete("b")
    assert store.info("b", include_deleted=True).deleted
    names = {i.name for i in store.list()}
    assert names == {"from-path", "from-file", "from-pieces", "to-b", "to-other"}
    assert "b" in {i.name for i in store.list(include_deleted=True)}
    assert store.cleanup() == 0
    store.seal()
    assert store.status().sealed

    objstore.sync.delete_store(bjs, other.name)
    assert other.name not in set(objstore.sync.list_stores(bjs))


def test_errors_are_the_async_classes(
    bjs: jetstream.sync.JetStream, make_store: StoreMaker, tmp_path: Path
) -> None:
    store = make_store()
    with pytest.raises(objstore.StoreNotFoundError):
        objstore.sync.open_store(bjs, "no_such_store")
    with pytest.raises(objstore.StoreNotFoundError):
        objstore.sync.delete_store(bjs, "no_such_store")
    with pytest.raises(jetstream.InvalidBucketNameError):
        objstore.sync.create_store(bjs, "bad name")
    with pytest.raises(objstore.ObjectNotFoundError):
        store.info("missing")
    with pytest.raises(objstore.ObjectNotFoundError):
        store.get_bytes("missing")
    with pytest.raises(objstore.ObjectNotFoundError), store.open("missing"):
        pass
    with pytest.raises(ClientValidationError):
        store.open("a", stall_timeout=0)  # at once, as the async twin
    with pytest.raises(objstore.SourceNotFoundError):
        store.put("a", str(tmp_path / "nothing-here"))
    with pytest.raises(objstore.UploadFailedError) as failed:
        store.put("a", ["not bytes"])  # type: ignore[list-item]
    assert isinstance(failed.value.__cause__, WrongTypeError)
    with pytest.raises(ClientValidationError):
        next(store.watch(include_history=True, updates_only=True))
    objstore.sync.delete_store(bjs, store.name)
    with pytest.raises(objstore.StoreNotFoundError):
        store.put("a", b"x")


def _consumers(js: jetstream.sync.JetStream, store: objstore.sync.ObjectStore) -> list[str]:
    return list(js.consumer_names(store.stream))


def test_leaving_a_listing_a_watch_or_a_read_early_deletes_its_consumer(
    bjs: jetstream.sync.JetStream, make_store: StoreMaker
) -> None:
    store = make_store()
    for name in ("a", "b", "c"):
        store.put(name, DATA, chunk_size=1024)

    listing = store.list()
    assert next(listing).name == "a"  # its reader may have finished the listing by now
    listing.close()  # type: ignore[attr-defined]
    assert _consumers(bjs, store) == []

    watch = store.watch()  # the current objects first, then each change
    with watch:  # type: ignore[attr-defined]
        assert [next(watch).name for _ in range(3)] == ["a", "b", "c"]
        assert len(_consumers(bjs, store)) == 1
        changed = store.put("a", b"changed")
        assert next(watch).nuid == changed.nuid
    assert _consumers(bjs, store) == []

    with store.open("b") as reader:
        assert len(next(iter(reader))) == 1024  # one chunk of ten
        assert len(_consumers(bjs, store)) == 1
    assert _consumers(bjs, store) == []


def test_an_encrypted_store_round_trips_as_the_async_one(
    bjs: jetstream.sync.JetStream, make_store: StoreMaker
) -> None:
    ring = Keyring({"k1": bytes(range(32))}, primary="k1")
    store = make_store(encryption=ring)
    assert store.encryption is ring
    info = store.put("secret", DATA, chunk_size=1024)
    assert store.get_bytes("secret") == DATA
    stored = bjs.get_last_message(store.stream, chunk_subject(store.name, info.nuid))
    assert DATA[-1024:] not in stored.data  # sealed on the client
    other = Keyring({"k2": bytes(range(64, 96))}, primary="k2")
    with pytest.raises(UnknownKeyIdError):
        objstore.sync.open_store(bjs, store.name, encryption=other).get_bytes("secret")
    rotated = Keyring({"k1": bytes(range(32)), "k2": bytes(range(64, 96))}, primary="k2")
    assert objstore.sync.open_store(bjs, store.name, encryption=rotated).rekey().rekeyed == 1
    assert objstore.sync.open_store(bjs, store.name, encryption=other).get_bytes("secret") == DATA


def test_an_iterable_source_is_read_off_the_loop_so_it_may_use_the_blocking_api(
    bjs: jetstream.sync.JetStream, make_store: StoreMaker, nats_server: jetstream.EmbeddedServer
) -> None:
    store = make_store()
    store.put("small", b"0123456789")

    def pieces() -> Iterator[bytes]:  # a blocking call on the loop's thread would be refused
        for _ in range(3):
            yield store.get_bytes("small")

    assert store.get_bytes(store.put("joined", pieces()).name) == b"0123456789" * 3

    store.put("big", DATA, chunk_size=1024)
    with store.open("big") as reader:  # a copy, read on the loop
        assert store.put("copy", reader, chunk_size=1024).digest == store.info("big").digest
    with jetstream.sync.connect(nats_server.url) as elsewhere:  # read by another connection
        source = objstore.sync.open_store(elsewhere, store.name)
        with source.open("big") as reader:
            assert store.put("copy2", reader).digest == store.info("big").digest
    with pytest.raises(ClientValidationError):  # its read is over: not an empty object
        store.put("copy3", reader)
    with pytest.raises(ClientValidationError):
        reader.read()
    assert "copy3" not in {i.name for i in store.list()}


def test_one_store_handle_serves_many_threads(make_store: StoreMaker) -> None:
    store = make_store()
    names = [f"o{i}" for i in range(16)]

    def round_trip(name: str) -> bytes:
        store.put(name, name.encode() * 100)
        return store.get_bytes(name)

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(round_trip, names)) == [n.encode() * 100 for n in names]
    assert {i.name for i in store.list()} == set(names)


def test_a_progress_callback_runs_on_the_loop_and_may_not_block(
    make_store: StoreMaker, tmp_path: Path
) -> None:
    store = make_store()
    threads: set[str] = set()

    def note_thread(done: int, total: int | None) -> None:
        threads.add(threading.current_thread().name)

    store.put("a", io.BytesIO(DATA), chunk_size=1024, progress=note_thread)
    assert threads == {"jetstream-sync"}

    def calls_back(done: int, total: int | None) -> None:
        store.info("a")

    with pytest.raises(jetstream.WrongEventLoopError):
        store.get_file("a", tmp_path / "unused.bin", progress=calls_back)


async def test_a_cancelled_upload_takes_no_more_pieces_of_an_iterable() -> None:
    taken: list[int] = []
    first, go_on = threading.Event(), threading.Event()

    def pieces() -> Iterator[bytes]:
        for i in range(1000):
            taken.append(i)
            if i == 0:
                first.set()
                go_on.wait()
            yield b"x"

    source = pulled_in_threads(pieces(), 1 << 20)  # one batch would take them all
    pull = asyncio.create_task(anext(source))  # type: ignore[arg-type]
    await asyncio.to_thread(first.wait)
    pull.cancel()  # what Ctrl-C does to a blocking put
    with pytest.raises(asyncio.CancelledError):
        await pull
    go_on.set()
    await asyncio.get_running_loop().shutdown_default_executor()  # the worker has returned
    assert taken == [0]
