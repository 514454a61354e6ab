"""What the natsobj stream-writer trials share: input files naming objects (every third from a
file read on the executor, the others from data, some of many chunks, some empty), the
contents each name ends with, a count of the meta records written while a trial runs, and
format ``natsobj_hooked``: the natsobj stream writer, stopped midway through partition 0 of
micro-batch ``hookMicroBatch`` once it stored ``hookObjects`` objects. It then creates
``<hookDir>/reached`` (once per hook directory) and, by ``hookAction``: ``kill`` SIGKILLs its
own Python worker, ``pause`` waits until ``<hookDir>/go`` exists (meanwhile the test restarts
the server, or SIGKILLs the driver). The other options are natsobj's."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jetstream
import objstore
from jetstream._options import run_sync
from jetstream._spark_task import TaskId
from objstore.spark._list import ObjectsDataSource
from objstore.spark._sink import ObjectStreamWriter
from objstore.spark._sink_store import Report, Row
from tests.spark.stream_sink_trials import Hook

FILES = 3  # one a micro-batch
OBJECTS = 8  # per file
Contents = dict[str, bytes]


def inputs(folder: Path, files: int = FILES) -> tuple[str, Contents]:
    """JSON files of rows ``name, text, path`` (``text`` or ``path`` set); the files the
    paths name, under ``folder/data``; and the content each name ends with."""
    (folder / "data").mkdir(parents=True)
    rows_folder = folder / "rows"
    rows_folder.mkdir()
    contents: Contents = {}
    for f in range(files):
        lines = []
        for o in range(OBJECTS):
            name = f"out/{f}/{o}.txt"
            content = ("" if o == 5 else f"{name} " * (1 + 200 * (o % 4))).encode()
            contents[name] = content
            row: dict[str, str | None] = {"name": name, "text": None, "path": None}
            if o % 3 == 0:
                path = folder / "data" / f"{f}-{o}"
                path.write_bytes(content)
                row["path"] = str(path)
            else:
                row["text"] = content.decode()
            lines.append(json.dumps(row))
        path = rows_folder / f"part-{f:03}.json"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))  # the source takes oldest first
    return str(rows_folder), contents


def start_query(spark: Any, inputs: str, checkpoint: str, fmt: str, **options: str) -> Any:
    """The input files, one a micro-batch, as ``name, data, path`` into ``fmt``;
    ``trigger(availableNow=True)``."""
    return (
        spark.readStream.schema("name string, text string, path string")
        .option("maxFilesPerTrigger", 1)
        .json(inputs)
        .selectExpr("name", "cast(text AS binary) AS data", "path")
        .writeStream.format(fmt)
        .options(**options)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )


def run(spark: Any, inputs: str, checkpoint: Path, fmt: str = "natsobj", **options: str) -> Any:
    query = start_query(spark, inputs, str(checkpoint), fmt, **options)
    query.awaitTermination()
    return query


def options(url: str, name: str, **more: str) -> dict[str, str]:
    return {"servers": url, "store": name, "chunkSize": "1024", **more}


def store(url: str, name: str, **options: Any) -> None:
    """Create store ``name`` (``options``: StoreOptions, e.g. ``replicas``)."""

    async def create() -> None:
        async with await jetstream.connect(url) as js:
            await objstore.create_store(js, name, **options)

    run_sync(create)


def contents(url: str, name: str, names: list[str], keyring: Any = None) -> Contents:
    async def read() -> Contents:
        async with await jetstream.connect(url) as js:
            store = await objstore.open_store(js, name, encryption=keyring)
            return {n: await store.get_bytes(n) for n in names}

    return run_sync(read)


def names(url: str, name: str) -> list[str]:
    async def read() -> list[str]:
        async with await jetstream.connect(url) as js:
            return [i.name async for i in (await objstore.open_store(js, name)).list()]

    return run_sync(read)


def last_seq(url: str, name: str) -> int:
    async def read() -> int:
        async with await jetstream.connect(url) as js:
            return (await js.stream_info(f"OBJ_{name}")).state.last_seq

    return run_sync(read)


@contextlib.contextmanager
def meta_writes(url: str, name: str) -> Iterator[list[str]]:
    """The names of every meta record written to store ``name`` while inside, in order, from a
    watch in a thread of its own (rollups keep only each name's last record, so writes are
    counted as they happen). On the way out an end marker is written and waited for."""
    seen: list[str] = []
    ready, stop = threading.Event(), threading.Event()

    async def watch() -> None:
        async with await jetstream.connect(url) as js:
            store = await objstore.open_store(js, name)
            watching = store.watch(updates_only=True)
            first = asyncio.ensure_future(anext(watching))
            while not (await js.stream_info(f"OBJ_{name}")).state.consumer_count:
                await asyncio.sleep(0.01)
            ready.set()
            info = await first
            while info.name != "~end":
                seen.append(info.name)
                info = await anext(watching)
            await watching.aclose()  # type: ignore[attr-defined]
            stop.set()

    thread = threading.Thread(target=lambda: asyncio.run(watch()), daemon=True)
    thread.start()
    assert ready.wait(30), "the watch started"
    try:
        yield seen
    finally:

        async def end() -> None:
            async with await jetstream.connect(url) as js:
                await (await objstore.open_store(js, name)).put("~end", b"")

        run_sync(end)
        assert stop.wait(60), "the watch saw the end marker"
        thread.join(30)


class HookedWriter(ObjectStreamWriter):
    def __init__(self, writer: ObjectStreamWriter, hook: Hook) -> None:
        super().__init__(writer.opts)
        self.hook = hook

    async def _store(self, task: TaskId, rows: list[Row]) -> Report:
        hook = self.hook
        if (task.batch, task.partition) == (hook.micro_batch, 0) and hook.batches < len(rows):
            await super()._store(task, rows[: hook.batches])  # the first objects: stored
            if hook.reached():
                if hook.action == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                go = Path(hook.folder) / "go"
                while not go.exists():  # the test restarts the server (or kills the driver)
                    await asyncio.sleep(0.02)
        return await super()._store(task, rows)


class HookedSource(ObjectsDataSource):
    @classmethod
    def name(cls) -> str:
        return "natsobj_hooked"

    def streamWriter(self, schema: Any, overwrite: bool) -> HookedWriter:
        options = self.options
        hook = Hook(
            folder=options.pop("hookdir"),
            micro_batch=int(options.pop("hookmicrobatch")),
            batches=int(options.pop("hookobjects")),
            action=options.pop("hookaction"),
        )
        return HookedWriter(super().streamWriter(schema, overwrite), hook)


def hook(folder: Path, objects: int, action: str, micro_batch: int = 1) -> dict[str, str]:
    return {
        "hookDir": str(folder),
        "hookMicroBatch": str(micro_batch),
        "hookObjects": str(objects),
        "hookAction": action,
    }


def wait_for(path: Path, what: str) -> None:
    deadline = time.monotonic() + 300  # a Spark start on a loaded machine
    while not path.exists():
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.02)
