"""What the stream-writer trials share: their input files (and each key's revisions when every
row is stored once), reads of the bucket, a driver in a process of its own, and format
``natskv_hooked``: the natskv stream writer, stopped at a chosen point of a micro-batch.
When partition 0 of micro-batch ``hookMicroBatch`` has stored ``hookBatches`` atomic
batches, it creates ``<hookDir>/reached`` (once per hook directory) and then, by
``hookAction``: ``kill`` SIGKILLs its own Python worker, ``pause`` waits until
``<hookDir>/go`` exists (meanwhile the test restarts the server, or SIGKILLs the driver).
The other options are natskv's."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jetstream
import kvstore
from jetstream._options import run_sync
from kvstore.spark import KVDataSource, KVStreamWriter
from kvstore.spark._options import Options
from kvstore.spark._sink import TaskId
from kvstore.spark._sink_store import Report


@dataclasses.dataclass(frozen=True)
class Hook:
    folder: str
    micro_batch: int
    batches: int
    action: str

    def reached(self) -> bool:
        """The first time only: a retried task or a restarted query goes on."""
        try:
            os.close(os.open(Path(self.folder) / "reached", os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return False
        return True


class HookedWriter(KVStreamWriter):
    def __init__(self, opts: Options, hook: Hook) -> None:
        super().__init__(opts)
        self.hook = hook

    def batch_stored(self, task: TaskId, report: Report) -> None:
        hook = self.hook
        if (task.batch, task.partition, report.batches) != (hook.micro_batch, 0, hook.batches):
            return
        if not hook.reached():
            return
        if hook.action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        go = Path(hook.folder) / "go"
        while not go.exists():  # the test restarts the server (or kills the driver) meanwhile
            time.sleep(0.02)


class HookedSource(KVDataSource):
    @classmethod
    def name(cls) -> str:
        return "natskv_hooked"

    def streamWriter(self, schema: Any, overwrite: bool) -> HookedWriter:
        options = self.options
        hook = Hook(
            folder=options.pop("hookdir"),
            micro_batch=int(options.pop("hookmicrobatch")),
            batches=int(options.pop("hookbatches")),
            action=options.pop("hookaction"),
        )
        return HookedWriter(super().streamWriter(schema, overwrite).opts, hook)


def start_query(spark: Any, inputs: str, checkpoint: str, fmt: str, **options: str) -> Any:
    """The query of the trials: the JSON files of ``inputs`` (``key``, ``value``), two files a
    micro-batch, into the stream writer ``fmt``; ``trigger(availableNow=True)``."""
    return (
        spark.readStream.schema("key string, value string")
        .option("maxFilesPerTrigger", 2)
        .json(inputs)
        .writeStream.format(fmt)
        .options(**options)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )


KEYS = 4  # per file
ROWS = 60  # per file: each key 15 times, every thirteenth row a delete
FILES = 6  # two a micro-batch: three micro-batches
Expected = dict[str, list[tuple[str, bytes]]]


def inputs(folder: Path, files: int = FILES) -> tuple[str, Expected]:
    """JSON files whose rows write the keys ``p<f % 2>.k<j>`` (two files of one micro-batch
    never share a key, so each key's revisions have one order); the revisions each key gets
    when every row is stored once, in order."""
    folder.mkdir()
    expected: Expected = {}
    for f in range(files):
        lines = []
        for r in range(ROWS):
            key, value = f"p{f % 2}.k{r % KEYS}", None if r % 13 == 12 else f"{f}.{r}"
            lines.append(json.dumps({"key": key, "value": value}))
            expected.setdefault(key, []).append(
                ("DEL", b"") if value is None else ("PUT", value.encode())
            )
        path = folder / f"part-{f:03}.json"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))  # the source takes oldest first
    return str(folder), expected


def bucket(url: str, name: str, **options: Any) -> None:
    async def create() -> None:
        async with await jetstream.connect(url) as js:
            await kvstore.create_bucket(js, name, history=64, **options)

    run_sync(create)


def revisions(url: str, name: str, keys: Iterator[str] | list[str]) -> Expected:
    async def read() -> Expected:
        async with await jetstream.connect(url) as js:
            bucket = await kvstore.open_bucket(js, name)
            return {k: [(e.op.value, e.value) for e in await bucket.history(k)] for k in keys}

    return run_sync(read)


def last_seq(url: str, name: str) -> int:
    async def read() -> int:
        async with await jetstream.connect(url) as js:
            return (await js.stream_info(f"KV_{name}")).state.last_seq

    return run_sync(read)


def hook(folder: Path, batches: int, action: str, micro_batch: int = 1) -> dict[str, str]:
    """The ``natskv_hooked`` options that stop partition 0 of ``micro_batch`` after it stored
    ``batches`` atomic batches, by ``action`` (``kill`` or ``pause``; see the module)."""
    return {
        "hookDir": str(folder),
        "hookMicroBatch": str(micro_batch),
        "hookBatches": str(batches),
        "hookAction": action,
    }


def wait_for(path: Path, what: str, alive: Callable[[], bool] = lambda: True) -> None:
    """Poll for a file the hooked writer creates (it runs in another process), while the
    process that should create it is ``alive``."""
    deadline = time.monotonic() + 300  # a Spark start on a loaded machine
    while not path.exists():
        assert alive() and time.monotonic() < deadline, f"never {what}"
        time.sleep(0.02)


def converged(cluster: Any, stream: str) -> None:
    """Wait until every replica of ``cluster`` (an EmbeddedCluster) holds ``stream`` up to the
    same last sequence: a read goes through a consumer that may sit on any replica, the
    restarted one included."""
    deadline = time.monotonic() + 60
    while True:
        states = [cluster.stream_state(i, stream) or {} for i in range(len(cluster.nodes))]
        if len({state.get("last_seq") for state in states}) == 1:
            return
        assert time.monotonic() < deadline, f"replicas never converged: {states}"
        time.sleep(0.1)


def run(spark: Any, inputs: str, checkpoint: Path, fmt: str = "natskv", **opts: str) -> Any:
    query = start_query(spark, inputs, str(checkpoint), fmt, **opts)
    query.awaitTermination()
    return query


def options(url: str, name: str, **more: str) -> dict[str, str]:
    return {"servers": url, "bucket": name, "batchSize": "8", **more}


ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def driver(
    inputs: str, checkpoint: Path, options: dict[str, str], **more: str
) -> Iterator[Callable[[], bool]]:
    """A Spark driver in a process of its own (tests/spark/stream_sink_driver.py) running
    ``start_query`` into ``natskv_hooked`` (``format="natsobj_hooked"``: the object trials'
    query into theirs); gives a function telling whether it still runs,
    and SIGKILLs it with its JVM on the way out, as a lost machine."""
    args = {"inputs": inputs, "checkpoint": str(checkpoint), "options": options, **more}
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.spark.stream_sink_driver", json.dumps(args)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
        start_new_session=True,  # its own process group: the driver and its JVM
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield lambda: process.poll() is None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def forget_commit(checkpoint: Path, batch: int) -> None:
    """Remove micro-batch ``batch`` from the checkpoint's commit log: a restart replays it."""
    (checkpoint / "commits" / str(batch)).unlink()
    (checkpoint / "commits" / f".{batch}.crc").unlink(missing_ok=True)


def differences(found: Expected, expected: Expected) -> list[str]:
    """Where each key's revisions differ from the input applied once (readable in a failure)."""
    lines = []
    for key in sorted(set(found) | set(expected)):
        got, want = found.get(key, []), expected.get(key, [])
        if got != want:
            at = next((i for i, (g, w) in enumerate(zip(got, want, strict=False)) if g != w), None)
            at = min(len(got), len(want)) if at is None else at
            lines.append(
                f"{key}: {len(got)} revisions for {len(want)} rows, first difference at {at}: "
                f"{got[at : at + 3]} instead of {want[at : at + 3]}"
            )
    return lines
