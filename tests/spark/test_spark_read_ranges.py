"""``natskv`` reads divided by sequence ranges (issue 17, deliverable 6), on a real server.

Each batch partition reads only its share of the stream's sequences, yet the union of the
partitions must be the bucket as of the one sequence pinned at planning: each key's last
revision at that point, once, whichever range its older revisions fell in. The partitions are
read here through the data source's own reader (planning, partitions, read) without a Spark
job, with partition counts up to one sequence per partition, so that every overwrite, delete,
purge and expiry marker lands on a range boundary somewhere; one Spark job checks the whole
path. The stream reader's ``maxRecordsPerTrigger`` counts rows, not sequences.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

import jetstream
import kvstore

pyspark = pytest.importorskip("pyspark", reason="needs the 'spark' extra")

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql.streaming.datasource import ReadMaxRows  # noqa: E402

import kvstore.spark  # noqa: E402
from jetstream._consume.scan import scan_stream  # noqa: E402
from jetstream._options import run_sync  # noqa: E402
from kvstore._models import op_from_headers  # noqa: E402
from kvstore.spark import KVDataSource, KVPartition, KVReader, KVStreamReader, Offset  # noqa: E402
from tests.proxy import TcpProxy  # noqa: E402

pytestmark = pytest.mark.spark

SCHEMA = kvstore.spark.ROW_TYPE
PARTITION_COUNTS = (1, 2, 3, 7, 1024)  # 1024: more than the stream's sequences, one each
LATE = ("k1", "k2", "late")  # written after planning


def _run(factory: Callable[[], Any]) -> Any:
    return run_sync(factory)


def _reader(url: str, name: str, parts: int, include_deletes: bool = False) -> KVReader:
    options = {"servers": url, "bucket": name, "numPartitions": str(parts)}
    options["includeDeletes"] = str(include_deletes).lower()
    return KVDataSource(options).reader(SCHEMA)


def _collect(reader: KVReader) -> dict[str, tuple[bytes, int, str]]:
    """The union of every partition's rows (asserting that no key comes twice)."""
    rows: dict[str, tuple[bytes, int, str]] = {}
    for partition in reader.partitions():
        for key, value, revision, _, op in reader.read(partition):
            assert key not in rows, f"{key} read by two partitions"
            rows[key] = (value, revision, op)
    return rows


async def _fill(url: str, name: str, *, history: int) -> None:
    """Keys with overwrites spread over the stream, deletes (one revived), a purge and an
    expiry marker: every kind of last revision, at many distances from the first one.

    The marker is made while the bucket keeps one revision per key: with more, a TTL below
    ``marker_ttl`` is refused (the server would stretch it), and a marker that lives only a
    few seconds could vanish during the test."""
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.create_bucket(js, name, marker_ttl=timedelta(minutes=10))
        await bucket.put("ttl", b"short", ttl=1)
        await bucket.put("k0", b"early")
        deadline = asyncio.get_running_loop().time() + 30
        while True:  # the server writes the expiry marker about 1 s later
            last = await js.get_last_message(bucket.stream, f"$KV.{name}.ttl", direct=False)
            if jetstream.headers.MARKER_REASON in last.headers:
                break
            assert asyncio.get_running_loop().time() < deadline, "no expiry marker"
            await asyncio.sleep(0.05)
        if history > 1:
            bucket = await kvstore.update_bucket(js, name, history=history)
        await bucket.put_many({f"k{i}": f"v0-{i}".encode() for i in range(30)})
        for round_ in range(1, 4):
            for i in range(0, 30, round_ + 1):
                await bucket.put(f"k{i}", f"v{round_}-{i}".encode())
            await bucket.put(f"new{round_}", b"n")
        await bucket.delete("k3")
        await bucket.delete("k5")
        await bucket.put("k5", b"revived")
        await bucket.purge("k7")
        await bucket.put("k9", b"last")


async def _expected(url: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The bucket now, read the ordinary ways: live keys (``keys`` + ``get_many``) and every
    key's last message, tombstones and markers included (a last-per-subject scan)."""
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.open_bucket(js, name)
        keys = [key async for key in bucket.keys()]
        snapshot = await bucket.get_many(keys)
        live = {k: (e.value, e.revision, "PUT") for k, e in snapshot.items()}
        every = {}
        prefix = f"$KV.{name}."
        async for m in scan_stream(js, bucket.stream, [f"{prefix}>"]):
            op = op_from_headers(m.headers).value
            every[m.subject[len(prefix) :]] = (m.data, m.seq, op)
    return live, every


async def _without_direct_get(url: str, name: str) -> None:
    async with await jetstream.connect(url) as js:
        info = await js.stream_info(f"KV_{name}")
        await js.update_stream(msgspec.structs.replace(info.config, allow_direct=False))


async def _write_late(url: str, name: str) -> None:
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.open_bucket(js, name)
        await bucket.put("k1", b"after planning")
        await bucket.delete("k2")
        await bucket.put("late", b"after planning")


@pytest.mark.parametrize(
    ("history", "direct"),
    [(1, True), (4, True), (4, False)],
    ids=["history1", "history4-direct-get", "history4-no-direct-get"],
)
def test_partitions_divide_the_stream_and_read_one_point_in_time(
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    history: int,
    direct: bool,
) -> None:
    url, name = nats_server.url, unique_name("rr")
    _run(lambda: _fill(url, name, history=history))
    live, every = _run(lambda: _expected(url, name))
    if not direct:
        _run(lambda: _without_direct_get(url, name))
    readers = {
        (parts, deletes): _reader(url, name, parts, deletes)
        for parts in PARTITION_COUNTS
        for deletes in (False, True)
    }  # all planned here, before the late writes
    assert "k7" not in live and every["k7"][2] == "PURGE" and every["ttl"][2] == "EXPIRED"
    assert every["k3"][2] == "DEL" and live["k5"][0] == b"revived"
    up_to = max(seq for _, seq, _ in every.values())
    _run(lambda: _write_late(url, name))

    for (parts, deletes), reader in readers.items():
        partitions = reader.partitions()
        assert all(isinstance(p, KVPartition) for p in partitions)
        assert reader.plan.up_to == up_to, "pinned at planning"
        listed = reader.plan.subjects  # the keys divided among the partitions (history > 1)
        share = up_to - reader.plan.first + 1 if listed is None else len(listed)
        assert len(partitions) == min(parts, share)
        assert listed is None or len(listed) == len(every), "every key, listed at planning"
        rows = _collect(reader)
        expected = every if deletes else live
        if history > 1:  # the revisions at the planned point are all still stored
            assert rows == expected, (parts, deletes)
        else:  # history 1: a key rewritten after planning lost its planned revision
            assert {k: v for k, v in rows.items() if k not in LATE} == {
                k: v for k, v in expected.items() if k not in LATE
            }, (parts, deletes)
            assert all(rows[k] == expected[k] for k in LATE if k in rows), "never a late write"
        assert "late" not in rows and all(seq <= up_to for _, seq, _ in rows.values())


@pytest.mark.parametrize("history", [1, 4])
async def test_each_partition_reads_only_its_share_of_the_stream(
    nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str], history: int
) -> None:
    """What a partition receives from the server, counted on the wire: about a quarter of
    the stream each for 4 partitions (the whole stream each before: a share by key hash)."""
    name = unique_name("rr")
    async with await jetstream.connect(nats_server.url) as js:
        bucket = await kvstore.create_bucket(js, name, history=history)
        for start in range(0, 8000, 1000):
            await bucket.put_many({f"k{i}": b"v" * 100 for i in range(start, start + 1000)})
    proxy = await TcpProxy(nats_server.port).start()
    try:

        async def received(reader: KVReader, partition: KVPartition) -> tuple[int, int]:
            before = proxy.bytes_to_client
            rows = await asyncio.to_thread(lambda: list(reader.read(partition)))
            return proxy.bytes_to_client - before, len(rows)

        whole = await asyncio.to_thread(_reader, proxy.url, name, 1)
        whole_bytes, whole_rows = await received(whole, whole.partitions()[0])
        reader = await asyncio.to_thread(_reader, proxy.url, name, 4)
        shares = [await received(reader, p) for p in reader.partitions()]
    finally:
        await proxy.close()
    assert whole_rows == 8000 and sum(rows for _, rows in shares) == 8000
    assert all(size < 0.45 * whole_bytes for size, _ in shares), (whole_bytes, shares)


def test_an_empty_bucket_reads_no_rows(
    nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    url, name = nats_server.url, unique_name("rr")

    async def create() -> None:
        async with await jetstream.connect(url) as js:
            await kvstore.create_bucket(js, name, history=3)

    _run(create)
    reader = _reader(url, name, 4)
    assert len(reader.partitions()) == 1 and _collect(reader) == {}


def test_a_spark_job_reads_the_snapshot_in_several_partitions(
    spark: SparkSession, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    url, name = nats_server.url, unique_name("rr")
    _run(lambda: _fill(url, name, history=4))
    live, _ = _run(lambda: _expected(url, name))
    df = spark.read.format("natskv").option("servers", url).option("numPartitions", 4).load(name)
    assert df.rdd.getNumPartitions() == 4
    rows = {r.key: (bytes(r.value), r.revision, r.op) for r in df.collect()}
    assert rows == live


async def _sparse(url: str, name: str) -> int:
    """A history-1 bucket whose sequences are mostly gone (each key rewritten 4 times) and
    whose keys alternate between two prefixes: 100 live ``a.*`` rows in 800 sequences. Plain
    puts: a micro-batch may end between any two of them."""
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.create_bucket(js, name)
        for round_ in range(4):
            keys = [f"{p}.{i}" for i in range(100) for p in "ab"]
            await asyncio.gather(*(bucket.put(key, f"{round_}".encode()) for key in keys))
        return (await js.stream_info(bucket.stream)).state.last_seq


def _micro_batches(options: dict[str, str], rows: int) -> tuple[list[list[str]], Offset]:
    """The keys of each micro-batch a stream reader plans with ``maxRecordsPerTrigger=rows``,
    from the start until nothing is left, and the offset it ends at."""
    reader = KVDataSource({**options, "maxRecordsPerTrigger": str(rows)}).streamReader(SCHEMA)
    assert isinstance(reader, KVStreamReader)
    start, batches = reader.initialOffset(), []
    while (end := reader.latestOffset(start, ReadMaxRows(rows))) != start:
        parts = reader.partitions(start, end)
        batches.append([row[0] for part in parts for row in reader.read(part)])
        start = end
    return batches, start


def test_a_micro_batch_never_ends_inside_a_put_many(
    nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """ "Never half a record" holds downstream too: a micro-batch ends before an atomic batch
    whose rows would pass the limit, or after it when it is larger than the limit alone."""
    url, name = nats_server.url, unique_name("mb")

    async def write() -> list[list[str]]:
        async with await jetstream.connect(url) as js:
            bucket = await kvstore.create_bucket(js, name)
            records = [[f"a.{i}" for i in range(30)], [f"p.{i}" for i in range(5)]]
            records += [[f"b.{i}" for i in range(10)], [f"c.{i}" for i in range(10)]]
            await bucket.put_many({key: b"v" for key in records[0]})
            for key in records[1]:
                await bucket.put(key, b"v")  # five single writes: any end between them
            for record in records[2:]:
                await bucket.put_many({key: b"v" for key in record})
            return records

    records = _run(write)
    batches, end = _micro_batches({"servers": url, "bucket": name}, rows=12)
    assert batches == [records[0], records[1], records[2], records[3]]
    assert end["seq"] == 55
    # Filtered: a.* is one record larger than the limit (then an empty batch moves the offset
    # past the other keys' sequences); p.* are single writes.
    batches, _ = _micro_batches({"servers": url, "bucket": name, "keys": "a.>"}, rows=7)
    assert batches == [records[0], []]
    batches, _ = _micro_batches({"servers": url, "bucket": name, "keys": "p.>"}, rows=2)
    assert batches == [records[1][:2], records[1][2:4], records[1][4:]]


def test_a_filtered_micro_batch_never_ends_inside_a_put_many_whose_commit_it_cannot_see(
    nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """With a key filter the reader may not see a batch's commit (stored on a key outside the
    filter): the next message of another batch, or the stream's end, closes it."""
    url, name = nats_server.url, unique_name("mf")

    async def write() -> None:
        async with await jetstream.connect(url) as js:
            bucket = await kvstore.create_bucket(js, name)
            for n in range(3):  # each record: 4 x.* keys, then its commit on y.n
                await bucket.put_many({**{f"x.{n}.{i}": b"v" for i in range(4)}, f"y.{n}": b""})

    _run(write)
    batches, end = _micro_batches({"servers": url, "bucket": name, "keys": "x.>"}, rows=6)
    assert [sorted({key.split(".")[1] for key in batch}) for batch in batches] == [
        ["0"],
        ["1"],
        ["2"],
    ]
    assert [len(batch) for batch in batches] == [4, 4, 4] and end["seq"] == 15


def test_max_records_per_trigger_counts_rows_not_sequences(
    nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    url, name = nats_server.url, unique_name("rr")
    last = _run(lambda: _sparse(url, name))
    batches, end = _micro_batches({"servers": url, "bucket": name, "keys": "a.>"}, rows=40)
    assert [len(batch) for batch in batches] == [40, 40, 20] and end["seq"] == last


def test_a_streaming_query_gets_full_micro_batches(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    url, name = nats_server.url, unique_name("rr")
    _run(lambda: _sparse(url, name))
    table = unique_name("t")
    query = (
        spark.readStream.format("natskv").option("servers", url).option("bucket", name)
        .option("keys", "a.>").option("maxRecordsPerTrigger", "40").load()
        .writeStream.format("memory").queryName(table)
        .option("checkpointLocation", str(tmp_path / "c")).trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()
    batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert batches == [40, 40, 20]
    assert spark.sql(f"select count(*) from {table}").collect()[0][0] == 100
