"""A Spark streaming pipeline into a KV bucket, exactly once: order events arrive as JSON files,
a streaming query turns each into its order's current status and stores it with
``writeStream.format("natskv")``, and a watch on the bucket prints every change as it lands.
Run again from its checkpoint, the query stores only the events that arrived since: none twice.

Runs a local SparkSession and, unless $NATS_URL is set, an embedded nats-server.
Needs the spark extra:  pip install 'jetstore[spark]'

    python examples/spark_streaming.py
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from contextlib import ExitStack
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

import jetstream
import jetstream.sync
import kvstore.spark  # before the session: Spark's Python workers then run this interpreter
import kvstore.sync

EVENTS = [
    [("1", "placed"), ("2", "placed"), ("3", "placed"), ("4", "placed")],
    [("1", "paid"), ("2", "paid"), ("3", "cancelled")],
    [("1", "shipped"), ("2", "shipped"), ("4", "paid")],  # arrives while the query is stopped
]


def nats_url(stack: ExitStack) -> str:
    if url := os.environ.get("NATS_URL"):
        print(f"using the NATS server at {url} (from NATS_URL)")
        return url
    server = stack.enter_context(jetstream.EmbeddedServer())
    print(f"using an embedded nats-server at {server.url} (pid {server.pid})")
    return server.url


def arrive(folder: Path, number: int) -> None:
    """A file of events lands in the folder the query reads."""
    lines = [json.dumps({"order": order, "status": status}) for order, status in EVENTS[number]]
    (folder / f"events-{number}.json").write_text("\n".join(lines) + "\n")


def statuses(spark: SparkSession, folder: Path) -> DataFrame:
    """Each event as its order's new status; a cancelled order's key is deleted (null value)."""
    return (
        spark.readStream.schema("order string, status string")
        .option("maxFilesPerTrigger", 1)
        .json(str(folder))
        .selectExpr(
            "concat('order.', order) AS key",
            "CASE WHEN status = 'cancelled' THEN NULL ELSE upper(status) END AS value",
        )
    )


def store(spark: SparkSession, folder: Path, url: str, checkpoint: str) -> None:
    """Run the query over every file there is, then stop (a restart resumes from the checkpoint)."""
    query = (
        statuses(spark, folder)
        .writeStream.format("natskv")
        .option("servers", url)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start("orders")
    )
    query.awaitTermination()
    print(f"query stopped after micro-batch {query.lastProgress['batchId']}")


def watch(url: str, expected: int, seen: list[str], ready: threading.Event) -> None:
    """Print each change of an order as it lands, until ``expected`` changes were seen."""
    with jetstream.sync.connect(url) as js:
        bucket = kvstore.sync.open_bucket(js, "orders")
        with bucket.watch("order.>") as watcher:
            ready.set()
            for entry in watcher:
                value = entry.value.decode() if entry.value else "-"
                print(f"  watched {entry.key} = {value} ({entry.op.name}, rev {entry.revision})")
                seen.append(entry.key)
                if len(seen) == expected:
                    return


def main() -> None:
    with ExitStack() as stack:
        url = nats_url(stack)
        with jetstream.sync.connect(url) as js:
            kvstore.sync.create_bucket(js, "orders", history=10)
        spark = SparkSession.builder.getOrCreate()
        kvstore.spark.register(spark)  # or rely on the pyspark_natskv auto-registration
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        events, checkpoint = folder / "events", str(folder / "checkpoint")
        events.mkdir()

        seen: list[str] = []
        ready = threading.Event()
        total = sum(map(len, EVENTS))
        watcher = threading.Thread(target=watch, args=(url, total, seen, ready), daemon=True)
        watcher.start()
        ready.wait()

        arrive(events, 0)
        arrive(events, 1)
        store(spark, events, url, checkpoint)
        arrive(events, 2)
        store(spark, events, url, checkpoint)  # from the checkpoint: only the new file
        watcher.join(timeout=60)
        print(f"{total} events, {len(seen)} changes watched: every event stored once")


if __name__ == "__main__":
    main()
