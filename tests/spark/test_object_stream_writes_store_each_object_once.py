"""What a natsobj streaming task does with its rows, against a real server and without Spark:
each row's object is stored once and whole, however often the task runs (a replay, a retry
after it died midway, two attempts racing), with objects of many chunks, empty ones, files and
binary data; a bad row stores nothing of the task."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import pytest

import jetstream
import objstore

pytest.importorskip("pyspark", reason="needs the 'spark' extra")

from jetstream._consume.scan import scan_stream
from jetstream._spark_task import TaskId
from objstore._core import StoreCore, open_core
from objstore._once import WRITE_HEADER, WriteTag
from objstore.spark._sink import ObjectStreamWriter, sink_options
from objstore.spark._sink_store import Limits, Row, store_objects

pytestmark = pytest.mark.spark

StoreFactory = Callable[..., Awaitable[objstore.ObjectStore]]

LIMITS = Limits(chunk_size=1024, concurrency=3)
TAG = WriteTag("query-1/4", "0")


def _rows(folder: Path) -> tuple[list[Row], dict[str, bytes]]:
    """Objects of many chunks, of one, empty, from files and from data; and their contents."""
    folder.mkdir(exist_ok=True)
    contents = {
        "big.bin": bytes(range(256)) * 40,  # 10 chunks of 1 KiB
        "empty.txt": b"",
        "one.txt": b"hello",
        "dir/naïve name.csv": b"a,b\n" * 300,
    }
    rows: list[Row] = []
    for i, (name, content) in enumerate(contents.items()):
        if i % 2:
            path = folder / f"f{i}"
            path.write_bytes(content)
            rows.append((name, None, str(path)))
        else:
            rows.append((name, content, None))
    return rows, contents


async def _contents(store: objstore.ObjectStore, names: Sequence[str]) -> dict[str, bytes]:
    return {name: await store.get_bytes(name) for name in names}


@contextlib.asynccontextmanager
async def _meta_writes(store: objstore.ObjectStore) -> AsyncIterator[list[str]]:
    """Every meta record written while inside (the names, in order): rollups keep only each
    name's last one, so the writes are counted as they happen."""
    seen: list[str] = []
    end = asyncio.Event()

    async def watch() -> None:
        async for info in store.watch(updates_only=True):
            if info.name == "~end":
                end.set()
                return
            seen.append(info.name)

    task = asyncio.create_task(watch())
    await asyncio.sleep(0)
    try:
        await asyncio.wait_for(_ready(store), 10)
        yield seen
        await store.put("~end", b"")
        await asyncio.wait_for(end.wait(), 10)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _ready(store: objstore.ObjectStore) -> None:
    """The watch's consumer exists: a put made now is seen."""
    while not (await store.js.stream_info(store.stream)).state.consumer_count:
        await asyncio.sleep(0.01)


async def _last_seq(store: objstore.ObjectStore) -> int:
    return (await store.js.stream_info(store.stream)).state.last_seq


async def _core(store: objstore.ObjectStore, **options: object) -> StoreCore:
    return await open_core(store.js, store.name, **options)  # type: ignore[arg-type]


async def test_a_replayed_task_stores_each_object_once(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    store = await make_store()
    core = await _core(store)
    rows, contents = _rows(tmp_path)
    async with _meta_writes(store) as writes:
        first = await store_objects(core, rows, TAG, LIMITS, 4)
        end = await _last_seq(store)
        again = await store_objects(core, rows, TAG, LIMITS, 4)
        assert await _last_seq(store) == end, "the replay stored nothing"
    assert (first.stored, first.found, again.stored, again.found) == (4, 0, 0, 4)
    assert first.bytes == sum(map(len, contents.values()))
    assert sorted(writes) == sorted(contents)
    assert await _contents(store, list(contents)) == contents
    info = await store.info("big.bin")
    assert (info.chunks, (info.headers or {})[WRITE_HEADER]) == (10, ["query-1/4/0"])


async def test_a_task_that_died_midway_stores_the_rest_once(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    store = await make_store()
    core = await _core(store)
    rows, contents = _rows(tmp_path)
    async with _meta_writes(store) as writes:
        await store_objects(core, rows[:2], TAG, LIMITS, 4)  # what the dead attempt stored
        replay = await store_objects(core, rows, TAG, LIMITS, 4)
    assert (replay.stored, replay.found) == (2, 2)
    assert sorted(writes) == sorted(contents)
    assert await _contents(store, list(contents)) == contents


async def test_two_attempts_racing_store_each_object_once_and_leave_no_chunk_behind(
    make_store: StoreFactory, js: jetstream.JetStream, tmp_path: Path
) -> None:
    store = await make_store()
    rows, _ = _rows(tmp_path)
    rows += [(f"many/{i}", bytes([i]) * 3000, None) for i in range(12)]
    async with _meta_writes(store) as writes:
        cores = [await _core(store), await _core(store)]
        one, two = await asyncio.gather(
            *(store_objects(core, rows, TAG, LIMITS, 4) for core in cores)
        )
    assert one.stored + two.stored == len(rows) and one.found + two.found == len(rows)
    assert sorted(writes) == sorted(r[0] for r in rows), "each object's meta written once"
    live = {i.nuid: i.chunks async for i in store.list()}
    chunks: dict[str, int] = {}
    async for message in scan_stream(
        js, store.stream, [f"$O.{store.name}.C.>"], last_per_subject=False, headers_only=True
    ):
        nuid = message.subject.rsplit(".", 1)[1]
        chunks[nuid] = chunks.get(nuid, 0) + 1
    assert chunks == {n: c for n, c in live.items() if c}, "the loser's chunks were purged"


@pytest.mark.parametrize(
    ("row", "error", "message"),
    [
        ((None, b"x", None), objstore.InvalidObjectNameError, "non-empty"),
        (("", b"x", None), objstore.InvalidObjectNameError, "non-empty"),
        (("bad\udcff", b"x", None), objstore.InvalidObjectNameError, "UTF-8"),
        (("n" * 70_000, b"x", None), objstore.InvalidObjectNameError, "too long"),
        (("both", b"x", "/etc/hostname"), jetstream.ClientValidationError, "not both"),
        (("neither", None, None), jetstream.ClientValidationError, "not neither"),
        (("gone", None, "/nonexistent/file"), objstore.SourceNotFoundError, "nonexistent"),
        (("a dir", None, "/tmp"), objstore.PathNotAllowedError, "/tmp"),
        (("one.txt", b"again", None), objstore.DuplicateObjectNameError, "two rows"),
    ],
)
async def test_a_bad_row_stores_nothing_of_the_task_unless_skipped(
    make_store: StoreFactory,
    tmp_path: Path,
    row: Row,
    error: type[Exception],
    message: str,
) -> None:
    store = await make_store()
    core = await _core(store)
    rows, contents = _rows(tmp_path)
    rows.insert(3, row)
    with pytest.raises(error, match=message) as caught:
        await store_objects(core, rows, TAG, LIMITS, 4)
    assert "row 3" in "".join(caught.value.__notes__)
    assert await _last_seq(store) == 0, "nothing stored"
    skipped = await store_objects(core, rows, TAG, Limits(1024, 3, skip_bad=True), 4)
    assert (skipped.stored, skipped.bad) == (4, 1)
    assert await _contents(store, list(contents)) == contents


async def test_a_path_outside_the_allowed_root_is_a_bad_row(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    store = await make_store()
    rows, _ = _rows(tmp_path / "in")
    outside = tmp_path / "secret"
    outside.write_bytes(b"secret")
    rows.append(("secret", None, str(outside)))
    limits = Limits(1024, 3, root=str(tmp_path / "in"))
    with pytest.raises(objstore.PathNotAllowedError):
        await store_objects(await _core(store), rows, TAG, limits, 4)
    assert await _last_seq(store) == 0


async def test_a_file_gone_or_changed_after_its_object_was_stored_is_not_stored_again(
    make_store: StoreFactory, tmp_path: Path
) -> None:
    store = await make_store()
    core = await _core(store)
    rows, contents = _rows(tmp_path)
    await store_objects(core, rows, TAG, LIMITS, 4)
    end = await _last_seq(store)
    await asyncio.to_thread(Path(rows[1][2]).unlink)  # a pipeline that moved its input away
    await asyncio.to_thread(Path(rows[3][2]).write_bytes, b"changed since")
    replay = await store_objects(core, rows, TAG, LIMITS, 4)
    assert (replay.found, replay.bad, await _last_seq(store)) == (4, 0, end)
    assert await _contents(store, list(contents)) == contents


async def test_a_name_another_partition_of_the_micro_batch_stored_fails_the_task(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    core = await _core(store)
    await store_objects(core, [("shared", b"from 0", None)], TAG, LIMITS, 4)
    other = WriteTag("query-1/4", "1")
    with pytest.raises(objstore.UploadFailedError, match="part 0") as caught:
        await store_objects(
            core, [("shared", b"from 1", None), ("own", b"x", None)], other, LIMITS, 4
        )
    assert "stored 1 objects" in "".join(caught.value.__notes__)
    assert await store.get_bytes("shared") == b"from 0"


async def test_two_queries_writing_one_name_each_store_a_revision_and_the_last_wins(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    core = await _core(store)
    async with _meta_writes(store) as writes:
        await store_objects(core, [("shared", b"query 1", None)], TAG, LIMITS, 4)
        later = WriteTag("query-2/0", "0")
        second = await store_objects(core, [("shared", b"query 2", None)], later, LIMITS, 0)
    assert (second.stored, writes) == (1, ["shared", "shared"])
    assert await store.get_bytes("shared") == b"query 2"


async def test_encrypted_objects_stored_once_and_no_key_file_where_a_task_runs_stores_nothing(
    make_store: StoreFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    store = await make_store()
    key = bytes(range(32))
    key_file = tmp_path / "keys.json"
    key_file.write_text(
        json.dumps({"primary": "k1", "keys": {"k1": base64.b64encode(key).decode()}})
    )
    schema = StructType([StructField("name", StringType()), StructField("data", BinaryType())])
    options = {"servers": nats_server.url, "store": store.name, "keyFile": str(key_file)}
    writer = ObjectStreamWriter(sink_options(options, schema))
    rows, contents = _rows(tmp_path / "in")
    task = TaskId("query-1", 4, 0)
    first = await asyncio.to_thread(writer.store, task, rows)
    again = await asyncio.to_thread(writer.store, task, rows)
    assert (first.report.stored, again.report.found) == (4, 4)
    ring = jetstream.Keyring({"k1": key}, primary="k1")
    secret = await objstore.open_store(store.js, store.name, encryption=ring)
    assert await _contents(secret, list(contents)) == contents
    raw = await store.get_bytes("dir/naïve name.csv")  # a handle without the key
    assert raw != contents["dir/naïve name.csv"] and b"a,b" not in raw, "stored encrypted"

    key_file.unlink()  # not on this executor
    end = await _last_seq(store)
    with pytest.raises(jetstream.InvalidKeyringError) as caught:
        await asyncio.to_thread(writer.store, TaskId("query-1", 5, 0), [("new", b"x", None)])
    assert "stored no object" in "".join(caught.value.__notes__)
    assert await _last_seq(store) == end
