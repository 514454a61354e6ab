"""Format ``natskv_hooked``: the natskv stream writer, stopped at a chosen point of a
micro-batch for the failure tests. When partition 0 of micro-batch ``hookMicroBatch`` has
stored ``hookBatches`` atomic batches, it creates ``<hookDir>/reached`` (once per hook
directory) and then, by ``hookAction``: ``kill`` SIGKILLs its own Python worker, ``pause``
waits until ``<hookDir>/go`` exists (meanwhile the test restarts the server, or SIGKILLs the
driver). The other options are natskv's."""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from pathlib import Path
from typing import Any

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
