"""Breaks of the ``natskv`` / ``natsobj`` Spark sources found by a hostile review
(helper-41); each failed before its fix, and asserts what a data engineer relies on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import jetstream
import kvstore
import objstore

pyspark = pytest.importorskip("pyspark", reason="needs the 'spark' extra")

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

import kvstore.spark  # noqa: E402
import objstore.spark  # noqa: E402
from kvstore.spark import ROW_TYPE, KVDataSource  # noqa: E402

pytestmark = pytest.mark.spark


async def _bucket(url: str, name: str, history: int = 1, keys: int = 20) -> None:
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.create_bucket(js, name, history=history)
        if keys:
            await bucket.put_many({f"k{i}": b"v" for i in range(keys)})


async def _delete_bucket(url: str, name: str) -> None:
    async with await jetstream.connect(url) as js:
        await kvstore.delete_bucket(js, name)


async def _store(url: str, name: str) -> None:
    async with await jetstream.connect(url) as js:
        await objstore.create_store(js, name)


# -- connection files: tlsCa / nkeySeedFile ------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "content"),
    [("tlsCa", None), ("tlsCa", "not a certificate\n"), ("nkeySeedFile", "not a seed\n")],
    ids=["tlsCa-missing", "tlsCa-malformed", "nkeySeedFile-malformed"],
)
def test_a_bad_connection_file_is_a_typed_error_naming_it(
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
    option: str,
    content: str | None,
) -> None:
    """A missing or malformed ``tlsCa`` / ``nkeySeedFile`` reached the user as a raw
    FileNotFoundError ("[Errno 2] No such file or directory", no path, no option),
    ssl.SSLError or nkeys.ErrInvalidSeed instead of a jetstream error naming the option or
    file."""
    name = unique_name("rc")
    jetstream.run_sync(lambda: _bucket(nats_server.url, name, keys=0))
    path = tmp_path / "file.pem"
    if content is not None:
        path.write_text(content)
    source = KVDataSource({"servers": nats_server.url, "bucket": name, option: str(path)})
    with pytest.raises(jetstream.JetStreamError) as caught:
        source.reader(ROW_TYPE)
    assert option in str(caught.value) or str(path) in str(caught.value)


# -- read schemas --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        [StructField("key", StringType()), StructField("value", IntegerType())],
        [StructField("key", BinaryType())],
        [StructField("op", IntegerType())],
    ],
    ids=["value-int", "key-binary", "op-int"],
)
def test_a_read_schema_of_the_wrong_type_is_a_column_error_at_planning(
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    fields: list[StructField],
) -> None:
    """``spark.read.format("natskv").schema("key string, value int")`` planned fine and failed
    every task with pyarrow's ArrowInvalid ("Could not convert b'v' ... to int32"), or a bare
    AssertionError for ``key binary``; the column check (``_projection``) only looks at names.
    A wrong type should be refused on the driver with ColumnError naming the column, as writes
    do."""
    name = unique_name("rs")
    jetstream.run_sync(lambda: _bucket(nats_server.url, name, keys=3))
    options = {"servers": nats_server.url, "bucket": name}
    with pytest.raises(jetstream.ColumnError, match=fields[-1].name):
        KVDataSource(options).reader(StructType(fields))
    with pytest.raises(jetstream.ColumnError, match=fields[-1].name):
        KVDataSource(options).streamReader(StructType(fields))


def test_a_wrong_read_schema_through_spark_names_the_column(
    spark: SparkSession, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """The same through Spark: the job fails with pyarrow's conversion error, not ours."""
    name = unique_name("rs")
    jetstream.run_sync(lambda: _bucket(nats_server.url, name, keys=3))
    with pytest.raises(Exception) as caught:
        spark.read.format("natskv").schema("key string, value int").option(
            "servers", nats_server.url
        ).load(name).collect()
    assert "ColumnError" in str(caught.value)


# -- a bucket deleted while a job reads it -------------------------------------------------------


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
    jetstream.run_sync(lambda: _bucket(nats_server.url, name, history=history))
    reader = KVDataSource({"servers": nats_server.url, "bucket": name}).reader(ROW_TYPE)
    partition = reader.partitions()[0]
    jetstream.run_sync(lambda: _delete_bucket(nats_server.url, name))
    with pytest.raises(kvstore.BucketNotFoundError, match=name):
        list(reader.read(partition))


def test_a_bucket_deleted_mid_stream_is_bucket_not_found_naming_it(
    nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """A micro-batch planned before the drop: ``latestOffset`` then says BucketNotFoundError
    naming the bucket, but the task reading the planned range says only "stream not found"."""
    name = unique_name("rd")
    jetstream.run_sync(lambda: _bucket(nats_server.url, name))
    reader = KVDataSource({"servers": nats_server.url, "bucket": name}).streamReader(ROW_TYPE)
    start = reader.initialOffset()
    partition = reader.partitions(start, reader.latestOffset(start, None))[0]
    jetstream.run_sync(lambda: _delete_bucket(nats_server.url, name))
    with pytest.raises(kvstore.BucketNotFoundError, match=name):
        list(reader.read(partition))


# -- upload_objects options ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value"),
    [("chunk_size", 0), ("chunk_size", -1), ("chunk_size", "65536"), ("concurrency", "4")],
    ids=["chunk_size-0", "chunk_size-negative", "chunk_size-str", "concurrency-str"],
)
def test_upload_objects_refuses_a_bad_size_option_before_the_job(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    option: str,
    value: Any,
) -> None:
    """``concurrency=0`` is refused up front with ClientValidationError, but ``chunk_size=0``
    or ``-1`` runs the whole Spark job and returns a DataFrame whose every row failed, and
    ``chunk_size="65536"`` (a string, as options often arrive from job configs) puts a raw
    ``TypeError: '<=' not supported between instances of 'int' and 'str'`` in every row;
    ``concurrency="4"`` raises that raw TypeError on the driver. Each should be a
    ClientValidationError naming the option before any task runs."""
    store = unique_name("ru")
    jetstream.run_sync(lambda: _store(nats_server.url, store))
    df = spark.createDataFrame([("a.txt", b"hello")], "name string, data binary")
    with pytest.raises(jetstream.ClientValidationError, match=option):
        objstore.spark.upload_objects(
            df, store, servers=nats_server.url, data_col="data", **{option: value}
        )


def test_a_natsobj_read_schema_picks_columns_and_refuses_wrong_types(
    spark: SparkSession, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """``natsobj`` ignored a user schema: ``.schema("name string, size long")`` failed every
    task (six values for two columns), and a wrong type planned fine."""
    store = unique_name("rl")

    async def fill() -> None:
        async with await jetstream.connect(nats_server.url) as js:
            await (await objstore.create_store(js, store)).put("a.txt", b"hello")

    jetstream.run_sync(fill)
    read = spark.read.format("natsobj").option("servers", nats_server.url)
    rows = read.schema("size long, name string").load(store).collect()
    assert [(row.size, row.name) for row in rows] == [(5, "a.txt")]
    source = objstore.spark.ObjectsDataSource({"servers": nats_server.url, "store": store})
    with pytest.raises(jetstream.ColumnError, match="size"):
        source.reader(StructType([StructField("size", StringType())]))
    with pytest.raises(jetstream.ColumnError, match="nope"):
        source.reader(StructType([StructField("nope", StringType())]))
