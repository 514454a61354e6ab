"""Reading a KV bucket through Spark (``natskv``): a batch read at 1, 2 and 4 partitions (each
partition reads its own share of the stream), a streaming read of the bucket's changes
(``availableNow``), and a per-row ``bucket.get`` loop as the baseline. Rows/s.

``--processes`` instead runs the partitions' reads without Spark, in a pool of 2 processes
(as local[2] does), interleaved with the earlier read (every partition reads the whole stream
and keeps the keys that hash to it) on the same bucket: the same work, the same moment.

    python -m benchmarks.spark_kv_read [--keys 500000] [--history 1] [--partitions 1 2 4]
    python -m benchmarks.spark_kv_read --processes [--rounds 3] [--keys 500000] [--history 1]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from typing import Any

import jetstream
import kvstore
from jetstream._options import run_sync

from .spark_kv import RowLoop, _session

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
            baseline = min(BASELINE_KEYS, keys)
            wanted = spark.range(baseline).selectExpr("concat('k', id) as key").coalesce(1)
            seconds, _ = _timed(
                lambda: wanted.foreachPartition(RowLoop(server.url, "bench", "get"))
            )
            lines.append(f"| per-row `bucket.get` loop (1 partition) | {baseline:,} | "
                         f"{seconds:.2f} | {baseline / seconds:,.0f} |")  # fmt: skip
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


def _read_partition(reader: Any, partition: Any) -> int:
    return sum(1 for _ in reader.read(partition))


def _hash_share(reader: Any, index: int, count: int) -> int:
    """The earlier partition read: the whole stream up to the planned sequence, keeping the
    newest message of the keys whose crc32 falls in this partition."""
    import zlib

    from kvstore._models import Op, op_from_headers, stream_name, subject_prefix
    from kvstore.spark._rows import row

    opts, up_to = reader.opts, reader.plan.up_to
    prefix = subject_prefix(opts.bucket)

    async def read() -> int:
        latest: dict[str, Any] = {}
        async with (
            opts.connection.session() as js,
            jetstream.OrderedConsumer(
                js, stream_name(opts.bucket), filter_subjects=opts.subjects, until_caught_up=True
            ) as consumer,
        ):
            async for message in consumer:
                meta = message.metadata
                if meta.stream_seq > up_to:
                    break
                key = message.subject[len(prefix) :]
                if zlib.crc32(key.encode()) % count == index:
                    latest[key] = message
        rows = 0
        for message in latest.values():
            if op_from_headers(message.headers) is Op.PUT:
                meta = message.metadata
                stored = jetstream.StoredMessage(
                    subject=message.subject, seq=meta.stream_seq, time_ns=meta.time_ns,
                    headers=message.headers, data=message.data,
                )  # fmt: skip
                row(stored, prefix, reader.projection)
                rows += 1
        return rows

    return int(run_sync(read))


def processes(keys: int, history: int, partitions: list[int], rounds: int) -> str:
    import multiprocessing
    import statistics
    from concurrent.futures import ProcessPoolExecutor

    from kvstore.spark import ROW_TYPE, KVDataSource

    times: dict[tuple[str, int], list[float]] = {}
    with jetstream.EmbeddedServer() as server:
        asyncio.run(_fill(server.url, "bench", keys, history))
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
            warm = KVDataSource({"servers": server.url, "bucket": "bench"}).reader(ROW_TYPE)
            list(pool.map(_hash_share, [warm] * 2, [0, 1], [1000, 1000]))  # imports, connects
            for _ in range(rounds):
                for parts in partitions:
                    options = {"servers": server.url, "bucket": "bench"}
                    options["numPartitions"] = str(parts)
                    reader = KVDataSource(options).reader(ROW_TYPE)
                    shares = reader.partitions()
                    start = time.perf_counter()
                    rows = sum(pool.map(_read_partition, [reader] * len(shares), shares))
                    times.setdefault(("ranges", parts), []).append(time.perf_counter() - start)
                    assert rows == keys, rows
                    start = time.perf_counter()
                    indexes = range(parts)
                    rows = sum(pool.map(_hash_share, [reader] * parts, indexes, [parts] * parts))
                    times.setdefault(("hash", parts), []).append(time.perf_counter() - start)
                    assert rows == keys, rows
    lines = [
        "| partitions | earlier: hash share (s) | now: own share (s) | now is N x faster |",
        "|---:|---:|---:|---:|",
    ]
    for parts in partitions:
        old = statistics.median(times[("hash", parts)])
        new = statistics.median(times[("ranges", parts)])
        lines.append(f"| {parts} | {old:.2f} | {new:.2f} | {old / new:.2f}x |")
    return (
        f"{keys:,} keys of 100-byte values (history {history}), partition reads in a pool of "
        f"2 processes, medians of {rounds} interleaved rounds:\n\n" + "\n".join(lines)
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark_kv_read")
    parser.add_argument("--keys", type=int, default=500_000)
    parser.add_argument("--history", type=int, default=1)
    parser.add_argument("--partitions", type=int, nargs="*", default=[1, 2, 4])
    parser.add_argument("--no-stream", action="store_true")
    parser.add_argument("--processes", action="store_true", help="without Spark, vs before")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.processes:
        print(processes(args.keys, args.history, args.partitions, args.rounds))
    else:
        print(measure(args.keys, args.history, args.partitions, not args.no_stream))


if __name__ == "__main__":
    main()
