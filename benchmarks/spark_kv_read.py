"""Reading a KV bucket through Spark (``natskv``): a batch read at 1, 2 and 4 partitions (each
partition reads its own range of the stream's sequences), a streaming read of the bucket's
changes (``availableNow``), and a per-row ``bucket.get`` loop as the baseline. Rows/s.

    python -m benchmarks.spark_kv_read [--keys 500000] [--history 1] [--partitions 1 2 4]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import jetstream
import kvstore

from .spark_kv import _session

VALUE = b"v" * 100
BASELINE_KEYS = 20_000  # the per-row loop reads this many keys (it is ~100x slower)


async def _fill(url: str, name: str, keys: int, history: int) -> None:
    """``keys`` keys of 100-byte values, in atomic batches of 1000, four in flight."""
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.create_bucket(js, name, history=history)
        starts = list(range(0, keys, 1000))
        for i in range(0, len(starts), 4):
            await asyncio.gather(
                *(
                    bucket.put_many({f"k{n}": VALUE for n in range(s, min(s + 1000, keys))})
                    for s in starts[i : i + 4]
                )
            )


class _GetLoop:
    """One partition, one connection, ``await bucket.get`` per key."""

    def __init__(self, url: str, bucket: str) -> None:
        self.url, self.bucket = url, bucket

    def __call__(self, rows: Iterator[Any]) -> None:
        async def run() -> None:
            async with await jetstream.connect(self.url) as js:
                bucket = await kvstore.open_bucket(js, self.bucket)
                for row in rows:
                    await bucket.get(row.key)

        asyncio.run(run())


def _timed(action: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def measure(keys: int, history: int, partitions: list[int], stream: bool) -> str:
    lines = ["| read | rows | seconds | rows/s |", "|---|---:|---:|---:|"]
    with jetstream.EmbeddedServer() as server:
        asyncio.run(_fill(server.url, "warm", 2000, history))
        asyncio.run(_fill(server.url, "bench", keys, history))
        spark = _session()
        try:

            def load(name: str, parts: int) -> Any:
                return (
                    spark.read.format("natskv").option("servers", server.url)
                    .option("numPartitions", parts).load(name)
                )  # fmt: skip

            load("warm", 2).count()
            for parts in partitions:
                seconds, rows = _timed(lambda p=parts: load("bench", p).count())  # type: ignore[misc]
                lines.append(
                    f"| batch, {parts} partition(s) | {rows:,} | {seconds:.2f} | "
                    f"{rows / seconds:,.0f} |"
                )
            if stream:
                seconds, rows = _timed(lambda: _stream(spark, server.url))
                lines.append(f"| stream (availableNow) | {rows:,} | {seconds:.2f} | "
                             f"{rows / seconds:,.0f} |")  # fmt: skip
            wanted = spark.range(BASELINE_KEYS).selectExpr("concat('k', id) as key").coalesce(1)
            seconds, _ = _timed(lambda: wanted.foreachPartition(_GetLoop(server.url, "bench")))
            lines.append(f"| per-row `bucket.get` loop (1 partition) | {BASELINE_KEYS:,} | "
                         f"{seconds:.2f} | {BASELINE_KEYS / seconds:,.0f} |")  # fmt: skip
        finally:
            spark.stop()
    return (
        f"{keys:,} keys of 100-byte values (history {history}), local[2], one run after a "
        "warm-up:\n\n" + "\n".join(lines)
    )


def _stream(spark: Any, url: str) -> int:
    """Every change of the bucket through a streaming query (availableNow, no sink cost)."""
    with tempfile.TemporaryDirectory() as checkpoint:
        query = (
            spark.readStream.format("natskv").option("servers", url).option("bucket", "bench")
            .load().writeStream.format("noop").option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination()
        return sum(p["numInputRows"] for p in query.recentProgress)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark_kv_read")
    parser.add_argument("--keys", type=int, default=500_000)
    parser.add_argument("--history", type=int, default=1)
    parser.add_argument("--partitions", type=int, nargs="*", default=[1, 2, 4])
    parser.add_argument("--no-stream", action="store_true")
    args = parser.parse_args()
    print(measure(args.keys, args.history, args.partitions, not args.no_stream))


if __name__ == "__main__":
    main()
