"""Buckets and stores that are missing, deleted between planning and the task, or deleted and
created again under a stream's checkpoint: the same named BucketNotFoundError / StoreNotFoundError
whichever way, and a resumed stream never skips the new bucket's first changes."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest

import jetstream
import kvstore

pyspark = pytest.importorskip("pyspark", reason="needs the 'spark' extra")


import kvstore.spark  # noqa: E402
from jetstream._options import run_sync  # noqa: E402
from kvstore.spark import ROW_TYPE, KVDataSource  # noqa: E402

pytestmark = pytest.mark.spark


def _run(factory: Callable[[], Any]) -> Any:
    return run_sync(factory)


async def _bucket(url: str, name: str, history: int = 1, keys: int = 20) -> None:
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.create_bucket(js, name, history=history)
        if keys:
            await bucket.put_many({f"k{i}": b"v" for i in range(keys)})


async def _delete_bucket(url: str, name: str) -> None:
    async with await jetstream.connect(url) as js:
        await kvstore.delete_bucket(js, name)


async def _fill_bucket(url: str, name: str, history: int = 1) -> None:
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.create_bucket(js, name, history=history)
        await bucket.put_many({f"k{i}": b"v" for i in range(50)})


def test_a_missing_bucket_or_store_is_the_same_named_error_both_ways(
    spark: Any, nats_server: jetstream.EmbeddedServer
) -> None:
    url = nats_server.url
    df = spark.createDataFrame([("a", b"1")], "key string, value binary")
    expected = r"BucketNotFoundError: bucket 'nosuchbucket' not found"
    with pytest.raises(Exception, match=expected):
        df.write.format("natskv").mode("append").option("servers", url).save("nosuchbucket")
    with pytest.raises(Exception, match=expected):
        spark.read.format("natskv").option("servers", url).load("nosuchbucket").collect()
    with pytest.raises(Exception, match=r"StoreNotFoundError: object store 'nosuchstore'"):
        spark.read.format("natsobj").option("servers", url).load("nosuchstore").collect()


@pytest.mark.parametrize("history", [1, 3])
def test_a_bucket_deleted_mid_read_is_bucket_not_found_naming_it(
    nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str], history: int
) -> None:
    """Planned, then the bucket is deleted before the task reads (a nightly job racing a
    drop). The task raised ``StreamNotFoundError: stream not found`` (history 1) or
    ``NoRespondersError: batched direct get on KV_x: no responders`` (history > 1): neither
    names the bucket, and ``except kvstore.BucketNotFoundError`` (what planning raises for the
    same condition, per the README) catches neither."""
    name = unique_name("rd")
    run_sync(lambda: _bucket(nats_server.url, name, history=history))
    reader = KVDataSource({"servers": nats_server.url, "bucket": name}).reader(ROW_TYPE)
    partition = reader.partitions()[0]
    run_sync(lambda: _delete_bucket(nats_server.url, name))
    with pytest.raises(kvstore.BucketNotFoundError, match=name):
        list(reader.read(partition))


def test_a_bucket_deleted_mid_stream_is_bucket_not_found_naming_it(
    nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """A micro-batch planned before the drop: ``latestOffset`` then says BucketNotFoundError
    naming the bucket, but the task reading the planned range says only "stream not found"."""
    name = unique_name("rd")
    run_sync(lambda: _bucket(nats_server.url, name))
    reader = KVDataSource({"servers": nats_server.url, "bucket": name}).streamReader(ROW_TYPE)
    start = reader.initialOffset()
    partition = reader.partitions(start, reader.latestOffset(start, None))[0]
    run_sync(lambda: _delete_bucket(nats_server.url, name))
    with pytest.raises(kvstore.BucketNotFoundError, match=name):
        list(reader.read(partition))


@pytest.mark.timeout(300)
def test_a_stream_resumed_after_the_bucket_was_recreated_does_not_skip_its_first_changes(
    spark: Any,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Any,
) -> None:
    """The checkpoint holds ``{"seq": 10}`` from the old bucket; the new bucket's revisions
    start at 1 again, and the resumed query reads only revisions 11 and 12: ``new0``..``new9``
    are silently lost (no error, no row). A user relies on a resumed stream either delivering
    every change of the bucket it reads or failing (the checkpoint's bucket is gone)."""
    name = unique_name("rc")

    async def fill(count: int, prefix: str) -> None:
        async with await jetstream.connect(nats_server.url) as js:
            bucket = await kvstore.create_bucket(js, name)
            for i in range(count):
                await bucket.put(f"{prefix}{i}", b"v")

    async def delete() -> None:
        async with await jetstream.connect(nats_server.url) as js:
            await kvstore.delete_bucket(js, name)

    def run() -> list[str]:
        keys: list[str] = []
        query = (
            spark.readStream.format("natskv")
            .option("servers", nats_server.url)
            .option("bucket", name)
            .load()
            .writeStream.foreachBatch(lambda df, _: keys.extend(r.key for r in df.collect()))
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination(120)
        finally:
            query.stop()
        return keys

    kvstore.spark.register(spark)
    _run(lambda: fill(10, "old"))
    assert run() == [f"old{i}" for i in range(10)]
    _run(delete)
    _run(lambda: fill(12, "new"))
    try:
        # As Spark's Kafka source fails on data loss: the checkpoint's bucket is gone.
        with pytest.raises(Exception, match="deleted and created again") as failed:
            run()
        assert "BucketNotFoundError" in str(failed.value), str(failed.value)[-2000:]
    finally:
        with contextlib.suppress(kvstore.BucketNotFoundError):
            _run(delete)
