"""Options a Spark job cannot honour are refused before the job runs, naming the option: unknown
options (with the known ones listed), a ``bucket``/``store`` option contradicting the load path,
connection files that are missing or malformed, and bad sizes for ``upload_objects``."""

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

import kvstore.spark  # noqa: E402
import objstore.spark  # noqa: E402
from jetstream._options import run_sync  # noqa: E402
from kvstore.spark import ROW_TYPE, KVDataSource  # noqa: E402

pytestmark = pytest.mark.spark


def _run(factory: Callable[[], Any]) -> Any:
    return run_sync(factory)


async def _bucket(url: str, name: str) -> None:
    async with await jetstream.connect(url) as js:
        await kvstore.create_bucket(js, name)


async def _store(url: str, name: str) -> None:
    async with await jetstream.connect(url) as js:
        await objstore.create_store(js, name)


@pytest.mark.parametrize(
    "action",
    ["write", "read", "stream", "natsobj"],
)
def test_unknown_options_are_refused_with_the_known_ones(
    spark: Any,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    action: str,
    tmp_path: Path,
) -> None:
    name = unique_name("sh")
    _run(lambda: _bucket(nats_server.url, name))
    url = nats_server.url
    df = spark.createDataFrame([("a", b"1")], "key string, value binary")
    with pytest.raises(Exception, match=r"unknown option\(s\) 'bacthsize'.*known options:"):
        if action == "write":
            df.write.format("natskv").mode("append").option("servers", url).option(
                "bacthSize", "10"
            ).save(name)
        elif action == "read":
            spark.read.format("natskv").option("servers", url).option("bacthSize", "1").load(
                name
            ).collect()
        elif action == "stream":
            query = (
                spark.readStream.format("natskv").option("servers", url)
                .option("bacthSize", "1").load(name).writeStream.format("memory")
                .queryName(unique_name("q")).option("checkpointLocation", str(tmp_path))
                .trigger(availableNow=True).start()
            )  # fmt: skip
            try:
                query.awaitTermination()
            finally:
                query.stop()
        else:
            spark.read.format("natsobj").option("servers", url).option("bacthSize", "1").load(
                name
            ).collect()
    with pytest.raises(jetstream.ClientValidationError, match="connectTimeout"):
        objstore.spark.upload_objects(df, name, servers=url, data_col="value", timeout="1")


def test_a_natskv_read_with_a_bucket_option_and_a_different_load_path_is_refused(
    spark: Any, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """``.option("bucket", A).load(B)`` reads A and drops B without a word (``bucket`` is
    taken first, the path only when it is absent), although unread options are refused
    elsewhere "so that nothing is silently ignored". Reading the wrong bucket silently is
    worse than a typo: the job succeeds with another bucket's rows."""
    first, second = unique_name("ba"), unique_name("bb")

    async def fill() -> None:
        async with await jetstream.connect(nats_server.url) as js:
            for name in (first, second):
                bucket = await kvstore.create_bucket(js, name)
                await bucket.put("from", name.encode())

    _run(fill)
    kvstore.spark.register(spark)
    try:
        rows = (
            spark.read.format("natskv")
            .option("servers", nats_server.url)
            .option("bucket", first)
            .load(second)
            .collect()
        )
    except Exception as exc:
        assert "ClientValidationError" in str(exc), str(exc)[-2000:]
        return
    assert [row.value for row in rows] == [second.encode()], "read the 'bucket' option's bucket"


def test_a_natsobj_read_with_a_store_option_and_a_different_load_path_is_refused(
    spark: Any, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """The same for natsobj: ``.option("store", A).load(B)`` lists A."""
    first, second = unique_name("sa"), unique_name("sb")

    async def fill() -> None:
        async with await jetstream.connect(nats_server.url) as js:
            for name in (first, second):
                store = await objstore.create_store(js, name)
                await store.put(name, b"x")

    _run(fill)
    objstore.spark.register(spark)
    try:
        rows = (
            spark.read.format("natsobj")
            .option("servers", nats_server.url)
            .option("store", first)
            .load(second)
            .collect()
        )
    except Exception as exc:
        assert "ClientValidationError" in str(exc), str(exc)[-2000:]
        return
    assert [row.name for row in rows] == [second], "listed the 'store' option's store"


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
    run_sync(lambda: _bucket(nats_server.url, name))
    path = tmp_path / "file.pem"
    if content is not None:
        path.write_text(content)
    source = KVDataSource({"servers": nats_server.url, "bucket": name, option: str(path)})
    with pytest.raises(jetstream.JetStreamError) as caught:
        source.reader(ROW_TYPE)
    assert option in str(caught.value) or str(path) in str(caught.value)


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
    run_sync(lambda: _store(nats_server.url, store))
    df = spark.createDataFrame([("a.txt", b"hello")], "name string, data binary")
    with pytest.raises(jetstream.ClientValidationError, match=option):
        objstore.spark.upload_objects(
            df, store, servers=nats_server.url, data_col="data", **{option: value}
        )
