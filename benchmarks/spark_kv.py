"""Writing 200,000 rows into a KV bucket through Spark (``natskv``, atomic batches of 1000,
2 partitions) vs a per-row ``bucket.put`` loop in one partition. Keys/s and the ratio.

    python -m benchmarks.spark_kv [rows]
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jetstream
import kvstore

VALUE_SQL = "repeat('v', 100)"


def _session() -> Any:
    from pyspark.sql import SparkSession

    import kvstore.spark  # before the session: its Python workers run this interpreter

    # Spark's Python workers import the checkout being measured, not the venv's install.
    root = str(Path(kvstore.__file__).resolve().parents[1])
    paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("jetstore-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    kvstore.spark.register(spark)
    return spark


class RowLoop:
    """The per-row baseline: one partition, one connection, ``await bucket.put`` (or
    ``get``) per row."""

    def __init__(self, url: str, bucket: str, operation: str = "put") -> None:
        self.url, self.bucket, self.operation = url, bucket, operation

    def __call__(self, rows: Iterator[Any]) -> None:
        async def run() -> None:
            async with await jetstream.connect(self.url) as js:
                bucket = await kvstore.open_bucket(js, self.bucket)
                for row in rows:
                    if self.operation == "put":
                        await bucket.put(row.key, row.value)
                    else:
                        await bucket.get(row.key)

        asyncio.run(run())


def measure(rows: int, spark: Any = None) -> str:
    """The table for ``rows`` rows, measured in ``spark`` (left running; by default a session
    of its own, stopped at the end)."""
    with jetstream.EmbeddedServer() as server:

        async def create(name: str) -> None:
            async with await jetstream.connect(server.url) as js:
                await kvstore.create_bucket(js, name)

        own = spark is None
        spark = _session() if own else spark
        try:
            df = (
                spark.range(rows)
                .selectExpr("concat('k', id) as key", f"cast({VALUE_SQL} as binary) as value")
                .repartition(2)
                .cache()
            )
            df.count()
            timings = {}
            for name, label in (("warm", None), ("spark", "natskv write (2 partitions)"),
                                ("loop", "per-row put loop (1 partition)")):  # fmt: skip
                asyncio.run(create(name))
                data = df.limit(5000) if name == "warm" else df
                start = time.perf_counter()
                if name == "loop":
                    data.coalesce(1).foreachPartition(RowLoop(server.url, name))
                else:
                    data.write.format("natskv").mode("append").option("servers", server.url).save(
                        name
                    )
                if label:
                    timings[label] = time.perf_counter() - start
            df.unpersist()
        finally:
            if own:
                spark.stop()
    ours = timings["natskv write (2 partitions)"]
    lines = ["| variant | seconds | keys/s | natskv is N x faster |", "|---|---:|---:|---:|"]
    for label, seconds in timings.items():
        ratio = "(ours)" if seconds == ours else f"{seconds / ours:.1f}x"
        lines.append(f"| {label} | {seconds:.2f} | {rows / seconds:,.0f} | {ratio} |")
    return f"{rows:,} rows of 100-byte values, one run after a warm-up:\n\n" + "\n".join(lines)


if __name__ == "__main__":
    print(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000))
