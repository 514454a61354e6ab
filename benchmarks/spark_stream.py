"""Streaming rows into a KV bucket through Spark: the exactly-once ``natskv`` stream writer vs
the ``natskv`` batch writer on the same rows, and vs what a user writes without the sink (a
``foreachBatch`` with a ``bucket.put`` per row). The same Parquet files (2 of them, so 2
partitions) feed all three; rows/s and each against the batch writer.

    python -m benchmarks.spark_stream [rows]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jetstream
import kvstore

from .spark_kv import VALUE_SQL, RowLoop, _session

SCHEMA = "key string, value binary"


class PerRowBatch:
    """``foreachBatch``: each micro-batch's partitions put row by row (at least once)."""

    def __init__(self, url: str, bucket: str) -> None:
        self.url, self.bucket = url, bucket

    def __call__(self, frame: Any, batch_id: int) -> None:
        frame.foreachPartition(RowLoop(self.url, self.bucket))


def _inputs(spark: Any, rows: int, folder: Path) -> str:
    path = str(folder / "rows")
    spark.range(rows).selectExpr(
        "concat('k', id) as key", f"cast({VALUE_SQL} as binary) as value"
    ).repartition(2).write.parquet(path)
    return path


def _stream(spark: Any, path: str, folder: Path, name: str, url: str) -> None:
    source = spark.readStream.schema(SCHEMA).parquet(path).writeStream
    if name.startswith("each"):
        sink = source.foreachBatch(PerRowBatch(url, name))
    else:
        sink = source.format("natskv").option("servers", url).option("bucket", name)
    query = (
        sink.option("checkpointLocation", str(folder / f"checkpoint-{name}"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def measure(rows: int, spark: Any = None) -> str:
    """The table for ``rows`` rows (100-byte values, distinct keys), each variant once after a
    warm-up (a stream write), in ``spark`` (left running; by default a session of its own,
    stopped at the end)."""
    with jetstream.EmbeddedServer() as server, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)

        async def create(name: str) -> None:
            async with await jetstream.connect(server.url) as js:
                await kvstore.create_bucket(js, name)

        own = spark is None
        spark = _session() if own else spark
        try:
            path = _inputs(spark, rows, folder)
            variants = {
                "natskv batch write": "batch",
                "natskv stream write (exactly once)": "stream",
                "foreachBatch, a put per row": "each",
            }
            timings: dict[str, float] = {}
            for label, kind in [("warm-up", "stream_warm"), *variants.items()]:
                asyncio.run(create(kind))
                start = time.perf_counter()
                if kind == "batch":
                    spark.read.parquet(path).write.format("natskv").mode("append").option(
                        "servers", server.url
                    ).save(kind)
                else:
                    _stream(spark, path, folder, kind, server.url)
                timings[label] = time.perf_counter() - start
            del timings["warm-up"]
        finally:
            if own:
                spark.stop()
    batch = timings["natskv batch write"]
    lines = ["| variant | seconds | rows/s | vs batch write |", "|---|---:|---:|---:|"]
    for label, seconds in timings.items():
        lines.append(
            f"| {label} | {seconds:.2f} | {rows / seconds:,.0f} | {batch / seconds:.2f}x |"
        )
    return (
        f"{rows:,} rows of 100-byte values, 2 partitions, one run after a "
        "warm-up:\n\n" + "\n".join(lines)
    )


if __name__ == "__main__":
    print(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000))
