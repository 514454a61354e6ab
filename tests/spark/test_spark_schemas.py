"""Schemas a Spark job declares for ``natskv`` and ``natsobj`` reads: columns picked by name
(case-insensitively), types a column can take (a revision read as int or double too), and a
wrong type refused at planning as a ColumnError naming the column, not a pyarrow error in every
task."""

from __future__ import annotations

from collections.abc import Callable
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
from jetstream._errors import ColumnError  # noqa: E402
from jetstream._options import run_sync  # noqa: E402
from kvstore.spark import KVDataSource  # noqa: E402

pytestmark = pytest.mark.spark


async def _bucket(url: str, name: str, history: int = 1, keys: int = 20) -> None:
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.create_bucket(js, name, history=history)
        if keys:
            await bucket.put_many({f"k{i}": b"v" for i in range(keys)})


def _run(factory: Callable[[], Any]) -> Any:
    return run_sync(factory)


async def _empty_bucket(url: str, name: str) -> None:
    async with await jetstream.connect(url) as js:
        await kvstore.create_bucket(js, name)


async def _messages(url: str, stream: str) -> int:
    async with await jetstream.connect(url) as js:
        return (await js.stream_info(stream)).state.messages


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
    run_sync(lambda: _bucket(nats_server.url, name, keys=3))
    options = {"servers": nats_server.url, "bucket": name}
    with pytest.raises(ColumnError, match=fields[-1].name):
        KVDataSource(options).reader(StructType(fields))
    with pytest.raises(ColumnError, match=fields[-1].name):
        KVDataSource(options).streamReader(StructType(fields))


def test_a_wrong_read_schema_through_spark_names_the_column(
    spark: SparkSession, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """The same through Spark: the job fails with pyarrow's conversion error, not ours."""
    name = unique_name("rs")
    run_sync(lambda: _bucket(nats_server.url, name, keys=3))
    with pytest.raises(Exception) as caught:
        spark.read.format("natskv").schema("key string, value int").option(
            "servers", nats_server.url
        ).load(name).collect()
    assert "ColumnError" in str(caught.value)


def test_a_natsobj_read_schema_picks_columns_and_refuses_wrong_types(
    spark: SparkSession, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """``natsobj`` ignored a user schema: ``.schema("name string, size long")`` failed every
    task (six values for two columns), and a wrong type planned fine."""
    store = unique_name("rl")

    async def fill() -> None:
        async with await jetstream.connect(nats_server.url) as js:
            await (await objstore.create_store(js, store)).put("a.txt", b"hello")

    run_sync(fill)
    read = spark.read.format("natsobj").option("servers", nats_server.url)
    rows = read.schema("size long, name string").load(store).collect()
    assert [(row.size, row.name) for row in rows] == [(5, "a.txt")]
    source = objstore.spark.ObjectsDataSource({"servers": nats_server.url, "store": store})
    with pytest.raises(ColumnError, match="size"):
        source.reader(StructType([StructField("size", StringType())]))
    with pytest.raises(ColumnError, match="nope"):
        source.reader(StructType([StructField("nope", StringType())]))


@pytest.mark.parametrize(
    ("schema", "expected"),
    [("key string, revision int", ("k", 1)), ("key string, revision double", ("k", 1.0))],
    ids=["revision-int", "revision-double"],
)
def test_a_natskv_read_with_a_widened_or_narrowed_revision_still_reads(
    spark: Any, nats_server: jetstream.EmbeddedServer, schema: str, expected: tuple[Any, ...]
) -> None:
    """``.schema("key string, revision int")`` read every row before the change (Spark
    converts the ints); _READ_TYPES now refuses anything but ``long`` at planning with
    ColumnError, breaking jobs that declared the revision as an int."""
    name = f"review9{schema.split()[-1]}"

    async def setup() -> None:
        async with await jetstream.connect(nats_server.url) as js:
            bucket = await kvstore.create_bucket(js, name)
            await bucket.put("k", b"v")

    run_sync(setup)
    kvstore.spark.register(spark)
    rows = (
        spark.read.format("natskv")
        .schema(schema)
        .option("servers", nats_server.url)
        .option("bucket", name)
        .load()
        .collect()
    )
    assert [tuple(row) for row in rows] == [expected]


def test_columns_match_case_insensitively_and_wrong_types_fail_before_the_job(
    spark: Any, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("sh")
    _run(lambda: _empty_bucket(nats_server.url, name))

    def save(df: Any) -> None:
        df.write.format("natskv").mode("append").option("servers", nats_server.url).save(name)

    save(spark.createDataFrame([("a", b"1")], "KEY string, VALUE binary"))
    assert _run(lambda: _messages(nats_server.url, f"KV_{name}")) == 1
    for schema, value, column in [
        ("key string, value int", 7, "'value'"),
        ("key string, value array<string>", ["x"], "'value'"),
        ("key int, value binary", b"1", "'key'"),
    ]:
        key = 1 if schema.startswith("key int") else "b"
        df = spark.createDataFrame([(key, value)], schema)
        with pytest.raises(Exception, match=f"ColumnError: natskv: column {column}"):
            save(df)
    assert _run(lambda: _messages(nats_server.url, f"KV_{name}")) == 1, "nothing written"
