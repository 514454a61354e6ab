"""PySpark data sources end to end: one local SparkSession for the test session (local[2],
UI off, loopback only) against the real nats-server of the fixtures."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import jetstream
import kvstore
import objstore
from tests.raw_nats import raw_publish

pyspark = pytest.importorskip("pyspark", reason="needs the 'spark' extra")

from pyspark.sql import SparkSession  # noqa: E402

import kvstore.spark  # noqa: E402
import objstore.spark  # noqa: E402
from jetstream._errors import ColumnError  # noqa: E402
from jetstream._options import run_sync  # noqa: E402

pytestmark = pytest.mark.spark


def _run(coro_factory: Callable[[], Any]) -> Any:
    return run_sync(coro_factory)


async def _bucket(url: str, name: str, **options: Any) -> None:
    async with await jetstream.connect(url) as js:
        await kvstore.create_bucket(js, name, **options)


async def _snapshot(url: str, name: str, keys: list[str]) -> kvstore.Snapshot:
    async with await jetstream.connect(url) as js:
        return await (await kvstore.open_bucket(js, name)).get_many(keys)


def test_write_then_read_a_bucket(
    spark: SparkSession, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("sk")
    _run(lambda: _bucket(nats_server.url, name, history=3))
    rows = [(f"user{i}.name", f"name-{i}".encode(), None) for i in range(2500)]
    rows.append(("user0.name", None, None))  # a null value deletes the key
    df = spark.createDataFrame(rows, "key string, value binary, ttl long").repartition(2)
    df.write.format("natskv").mode("append").option("servers", nats_server.url).option(
        "bucket", name
    ).option("ttlColumn", "ttl").save()
    snap = _run(
        lambda: _snapshot(nats_server.url, name, ["user1.name", "user2499.name", "user0.name"])
    )
    assert snap["user1.name"].value == b"name-1" and snap.missing == ("user0.name",)

    read = (
        spark.read.format("natskv")
        .option("servers", nats_server.url)
        .option("numPartitions", 3)
        .load(name)
    )
    assert read.rdd.getNumPartitions() == 3
    assert read.count() == 2499 and read.select("key").distinct().count() == 2499
    first = read.where("key = 'user7.name'").collect()[0]
    assert (first.value, first.op) == (b"name-7", "PUT") and first.revision > 0
    filtered = (
        spark.read.format("natskv").option("servers", nats_server.url)
        .option("keys", "user1.>,user2.*").load(name)
    )  # fmt: skip
    assert filtered.count() == 2, "server-side key filters"
    with pytest.raises(Exception, match="invalid key filter"):
        spark.read.format("natskv").option("servers", nats_server.url).option(
            "keys", "user1*"
        ).load(name).count()
    texts = (
        spark.read.format("natskv").schema("key string, value string")
        .option("servers", nats_server.url).option("keys", "user12.name").load(name).collect()
    )  # fmt: skip
    assert [tuple(r) for r in texts] == [("user12.name", "name-12")]


@pytest.mark.parametrize("history", [1, 3])
def test_reads_skip_a_key_that_is_not_utf8(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
    history: int,
) -> None:
    name = unique_name("sk")
    _run(lambda: _bucket(nats_server.url, name, history=history))

    async def write() -> None:
        async with await jetstream.connect(nats_server.url) as js:
            bucket = await kvstore.open_bucket(js, name)
            await bucket.put("a", b"1")
            await raw_publish(nats_server.url, [(f"$KV.{name}.k".encode() + b"\xff", b"", b"x")])
            await bucket.put("z", b"2")

    _run(write)
    read = spark.read.format("natskv").option("servers", nats_server.url).load(name)
    assert sorted((r.key, r.value) for r in read.collect()) == [("a", b"1"), ("z", b"2")]
    output = tmp_path / "out"
    query = (
        spark.readStream.format("natskv").option("servers", nats_server.url)
        .option("bucket", name).load()
        .writeStream.format("parquet").option("path", str(output))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()
    streamed = spark.read.parquet(str(output)).orderBy("revision").collect()
    assert [(r.key, r.revision) for r in streamed] == [("a", 1), ("z", 3)]


def test_bad_options_fail_at_planning(
    spark: SparkSession, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("sk")
    _run(lambda: _bucket(nats_server.url, name))
    df = spark.createDataFrame([("a", b"1")], "key string, value binary")

    def writer() -> Any:
        return df.write.format("natskv").option("servers", nats_server.url).option("bucket", name)

    with pytest.raises(Exception, match="append"):
        writer().mode("overwrite").save()
    with pytest.raises(Exception, match="batchSize"):
        writer().mode("append").option("batchSize", "5000").save()
    with pytest.raises(Exception, match="nope"):
        writer().mode("append").option("keyColumn", "nope").save()
    with pytest.raises(Exception, match="bucket"):
        df.write.format("natskv").mode("append").option("servers", nats_server.url).save()


def test_a_failed_task_aborts_and_keeps_whole_batches(
    spark: SparkSession, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """One partition fails (a bad key); the other's batches are stored, each one whole."""
    name = unique_name("sk")
    _run(lambda: _bucket(nats_server.url, name))
    good = [(f"ok{i}", b"v") for i in range(1500)]
    bad = [(f"bad{i}", b"v") for i in range(10)] + [("not a key", b"v")]
    df = (
        spark.createDataFrame(good + bad, "key string, value binary")
        .coalesce(1)
        .union(spark.createDataFrame(bad, "key string, value binary"))
    )
    with pytest.raises(Exception, match="invalid key"):
        df.write.format("natskv").mode("append").option("servers", nats_server.url).option(
            "bucket", name
        ).save()
    stored = _run(lambda: _snapshot(nats_server.url, name, [f"ok{i}" for i in range(1500)]))
    assert len(stored) in (0, 1000, 1500), "atomic per batch of 1000: never a partial batch"


def test_streaming_reads_resume_from_a_checkpoint(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("sk")
    _run(lambda: _bucket(nats_server.url, name, history=5))  # keeps revisions a delete follows

    async def write(start: int, count: int) -> None:
        async with await jetstream.connect(nats_server.url) as js:
            bucket = await kvstore.open_bucket(js, name)
            await bucket.put_many({f"k{i}": str(i).encode() for i in range(start, start + count)})
            await bucket.delete(f"k{start}")

    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run_once() -> list[Any]:
        """One availableNow run into parquet files; returns every row written so far."""
        query = (
            spark.readStream.format("natskv").option("servers", nats_server.url)
            .option("bucket", name).option("maxRecordsPerTrigger", "40").load()
            .writeStream.format("parquet").option("path", str(output))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination()
        return spark.read.parquet(str(output)).orderBy("revision").collect()

    _run(lambda: write(0, 100))
    first = run_once()
    assert len(first) == 101 and first[-1].op == "DEL"
    assert [r.revision for r in first] == list(range(1, 102))
    _run(lambda: write(100, 5))
    second = run_once()
    assert [r.revision for r in second] == list(range(1, 108)), "resumed: nothing twice"


def test_expiry_arrives_as_a_row(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    from datetime import timedelta

    name = unique_name("sk")
    # The marker lives long enough for a slow Spark start (with 5 s it expired before the read).
    _run(lambda: _bucket(nats_server.url, name, marker_ttl=timedelta(minutes=10)))

    async def put_and_wait_for_the_marker() -> None:
        async with await jetstream.connect(nats_server.url) as js:
            await (await kvstore.open_bucket(js, name)).put("session", b"t", ttl=1)
            deadline = asyncio.get_running_loop().time() + 30
            while True:  # the server writes the marker about 1 s later (later under load)
                last = await js.get_last_message(f"KV_{name}", f"$KV.{name}.session")
                if jetstream.headers.MARKER_REASON in last.headers:
                    return
                assert asyncio.get_running_loop().time() < deadline, "no expiry marker"
                await asyncio.sleep(0.1)

    _run(put_and_wait_for_the_marker)
    table = unique_name("t")
    query = (
        spark.readStream.format("natskv").option("servers", nats_server.url).load(name)
        .writeStream.format("memory").queryName(table)
        .option("checkpointLocation", str(tmp_path / "c")).trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()
    ops = [r.op for r in spark.sql(f"select op from {table} order by revision").collect()]
    assert ops == ["EXPIRED"], "the marker replaced the value (one revision per key)"


def test_upload_objects_and_list_them(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("so")

    async def create() -> None:
        async with await jetstream.connect(nats_server.url) as js:
            await objstore.create_store(js, name)

    _run(create)
    paths = []
    for i in range(6):
        path = tmp_path / f"f{i}.bin"
        path.write_bytes(os.urandom(1000 * (i + 1)))
        paths.append((f"file{i}", str(path)))
    paths.append(("missing", str(tmp_path / "nope.bin")))
    df = spark.createDataFrame(paths, "name string, path string").repartition(2)
    results = objstore.spark.upload_objects(df, name, servers=nats_server.url, path_col="path")
    rows = {r.name: r for r in results.collect()}
    assert rows["missing"].error and rows["missing"].error.startswith("SourceNotFoundError")
    assert all(
        rows[f"file{i}"].size == 1000 * (i + 1) and rows[f"file{i}"].error is None for i in range(6)
    )
    in_memory = spark.createDataFrame([("blob", b"12345")], "name string, data binary")
    (blob,) = objstore.spark.upload_objects(
        in_memory, name, servers=nats_server.url, data_col="data"
    ).collect()
    assert (blob.size, blob.chunks) == (5, 1)
    listed = spark.read.format("natsobj").option("servers", nats_server.url).load(name)
    assert sorted(r.name for r in listed.collect()) == ["blob"] + [f"file{i}" for i in range(6)]
    with pytest.raises(jetstream.ClientValidationError):
        objstore.spark.upload_objects(
            df, name, servers=nats_server.url, path_col="path", data_col="path"
        )


def test_registration_without_register_call(nats_server: jetstream.EmbeddedServer) -> None:
    """The pyspark_natskv / pyspark_natsobj shims name the formats for Spark's lookup."""
    import pyspark_natskv
    import pyspark_natsobj

    assert pyspark_natskv.DefaultSource.name() == "natskv"
    assert pyspark_natsobj.DefaultSource.name() == "natsobj"


async def _store(url: str, name: str) -> None:
    async with await jetstream.connect(url) as js:
        await objstore.create_store(js, name)


async def _messages(url: str, stream: str) -> int:
    async with await jetstream.connect(url) as js:
        return (await js.stream_info(stream)).state.messages


def test_natsobj_limit_and_include_deleted(
    spark: Any, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("sh")

    async def fill() -> None:
        async with await jetstream.connect(nats_server.url) as js:
            store = await objstore.create_store(js, name)
            for i in range(4):
                await store.put(f"o{i}", b"x" * (i + 1))
            await store.delete("o0")

    _run(fill)

    def listed(**options: str) -> list[str]:
        reader = spark.read.format("natsobj").option("servers", nats_server.url)
        rows = reader.options(**options).load(name).collect()
        assert all(isinstance(r.modified, datetime) for r in rows)  # ObjectInfo.mtime
        return sorted(r.name for r in rows)

    assert listed() == ["o1", "o2", "o3"]
    assert listed(includeDeleted="true") == ["o0", "o1", "o2", "o3"]
    assert len(listed(limit="2")) == 2


def test_upload_objects_refuses_repeated_names_and_reports_a_missing_store_per_row(
    spark: Any, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("sh")
    _run(lambda: _store(nats_server.url, name))
    rows = [(f"n{i % 5}", bytes([i]) * 100) for i in range(8)]  # n0, n1, n2 twice
    df = spark.createDataFrame(rows, "name string, data binary").repartition(2)
    with pytest.raises(objstore.DuplicateObjectNameError) as caught:
        objstore.spark.upload_objects(df, name, servers=nats_server.url, data_col="data")
    assert sorted(caught.value.names) == ["n0", "n1", "n2"]
    assert _run(lambda: _messages(nats_server.url, f"OBJ_{name}")) == 0, "nothing uploaded"

    unique = spark.createDataFrame(rows[:5], "NAME string, data binary")
    missing = objstore.spark.upload_objects(
        unique, "nosuchstore", servers=nats_server.url, data_col="DATA"
    ).collect()
    assert len(missing) == 5
    assert all(r.error and r.error.startswith("StoreNotFoundError") for r in missing)
    with pytest.raises(ColumnError, match="'data' has type string"):
        objstore.spark.upload_objects(
            spark.createDataFrame([("a", "b")], "name string, data string"),
            name,
            servers=nats_server.url,
            data_col="data",
        )
