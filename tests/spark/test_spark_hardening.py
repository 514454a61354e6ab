"""Spark data sources at the edges: dead servers, failed tasks, misspelled options, wrong
columns, repeated object names, discovery after an editable install (issue 10, 20-25)."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import textwrap
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import jetstream
import kvstore
import objstore

pyspark = pytest.importorskip("pyspark", reason="needs the 'spark' extra")

import kvstore.spark  # noqa: E402
import objstore.spark  # noqa: E402

from .spark_session import ROOT  # noqa: E402


def _packages() -> list[str]:
    """The packages pyproject.toml installs (a copy without one of them fails to install)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(config["tool"]["setuptools"]["packages"])


pytestmark = pytest.mark.spark


def _run(factory: Callable[[], Any]) -> Any:
    return jetstream.run_sync(factory)


async def _bucket(url: str, name: str) -> None:
    async with await jetstream.connect(url) as js:
        await kvstore.create_bucket(js, name)


async def _store(url: str, name: str) -> None:
    async with await jetstream.connect(url) as js:
        await objstore.create_store(js, name)


async def _messages(url: str, stream: str) -> int:
    async with await jetstream.connect(url) as js:
        return (await js.stream_info(stream)).state.messages


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_dead_server_fails_the_job_within_seconds_with_the_real_error(
    spark: Any, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """Was 120 s (nats-py's reconnect budget) whatever connectTimeout said."""
    name = unique_name("sd")
    _run(lambda: _bucket(nats_server.url, name))
    df = spark.createDataFrame([("a", b"1")], "key string, value binary")
    started = time.monotonic()  # the same job against a live server: Spark's own overhead
    df.write.format("natskv").mode("append").option("servers", nats_server.url).save(name)
    overhead = time.monotonic() - started
    url = f"nats://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(Exception, match="ConnectionFailedError") as caught:
        df.write.format("natskv").mode("append").option("servers", url).option(
            "connectTimeout", "1"
        ).option("connectAttempts", "2").save("b")
    elapsed = time.monotonic() - started
    assert "ConnectionReconnectingError" not in str(caught.value)
    assert elapsed - overhead <= 15, f"the job failed after {elapsed:.1f} s ({overhead:.1f} s)"


def test_a_failed_task_reports_what_it_stored_and_abort_counts_it(
    spark: Any,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The abort log said "0 keys in 0 batches" while failed tasks had stored keys."""
    name = unique_name("sh")
    _run(lambda: _bucket(nats_server.url, name))
    good = [(f"ok{i}", b"v") for i in range(1500)]
    df = spark.createDataFrame([*good, ("not a key", b"v")], "key string, value binary")
    options = {"servers": nats_server.url, "bucket": name}
    writer = kvstore.spark.KVDataSource(options).writer(df.schema, False)  # start = 0
    with pytest.raises(Exception, match="invalid key") as caught:
        df.coalesce(1).write.format("natskv").mode("append").options(**options).save()
    assert "this task stored 1000 keys in 1 atomic batches" in str(caught.value)
    with caplog.at_level(logging.WARNING, logger="kvstore.spark"):
        writer.abort([None])  # what Spark hands abort when the only task failed
    (record,) = [r for r in caplog.records if "aborted" in r.getMessage()]
    assert "0 of 1 tasks succeeded, 1 failed" in record.getMessage()
    assert "failed ones included, stored at most 1000 revisions (1..1000" in record.getMessage()


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
        return sorted(r.name for r in reader.options(**options).load(name).collect())

    assert listed() == ["o1", "o2", "o3"]
    assert listed(includeDeleted="true") == ["o0", "o1", "o2", "o3"]
    assert len(listed(limit="2")) == 2


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


def test_columns_match_case_insensitively_and_wrong_types_fail_before_the_job(
    spark: Any, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("sh")
    _run(lambda: _bucket(nats_server.url, name))

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
    with pytest.raises(jetstream.ColumnError, match="'data' has type string"):
        objstore.spark.upload_objects(
            spark.createDataFrame([("a", "b")], "name string, data string"),
            name,
            servers=nats_server.url,
            data_col="data",
        )


def test_formats_are_found_after_an_editable_install_without_register(
    nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    """`pip install -e .` (the README's install) used setuptools' import hook, which
    pkgutil.iter_modules() (Spark's lookup of pyspark_* modules) does not see."""
    name = unique_name("sh")
    _run(lambda: _bucket(nats_server.url, name))
    source = tmp_path / "src"
    files = subprocess.run(
        ["git", "ls-files", *_packages(), "pyspark_*.py", "README.md"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    for file in [*files, "pyproject.toml"]:  # pyproject as in the work tree
        (source / file).parent.mkdir(parents=True, exist_ok=True)
        (source / file).write_bytes((ROOT / file).read_bytes())
    venv = tmp_path / "venv"
    subprocess.run([sys.base_prefix + "/bin/python3", "-m", "venv", "--without-pip", str(venv)],
                   check=True)  # fmt: skip
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    here = subprocess.run(
        [sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "deps.pth").write_text(here + "\n")  # pyspark, nats-py: not jetstore
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps",
         "-e", source],
        check=True, capture_output=True,
    )  # fmt: skip
    script = textwrap.dedent(f"""
        import os, sys
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .config("spark.driver.host", "127.0.0.1")
                 .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
        try:
            df = spark.createDataFrame([("k", b"v")], "key string, value binary")
            df.write.format("natskv").mode("append").option("servers", {nats_server.url!r}) \\
                .save({name!r})
            rows = spark.read.format("natskv").option("servers", {nats_server.url!r}) \\
                .load({name!r}).collect()
            print("ROWS", [(r.key, r.value) for r in rows])
            import kvstore
            print("FROM", kvstore.__file__)
        finally:
            spark.stop()
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only the install
    done = subprocess.run(
        [python, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=110, env=env
    )
    assert "ROWS [('k', b'v')]" in done.stdout, done.stderr[-3000:]
    assert f"FROM {source}" in done.stdout


def test_a_server_dying_mid_write_shows_the_write_error_not_a_close_error(
    spark: Any, unique_name: Callable[[str], str]
) -> None:
    """Was nats' ConnectionReconnectingError, raised by close() over the real error. The job
    runs in a second Python thread: register() there makes the formats visible to it (was
    DATA_SOURCE_NOT_FOUND: Spark looks formats up in the thread's active session)."""
    import threading

    name = unique_name("sh")
    with jetstream.EmbeddedServer() as server:
        _run(lambda: _bucket(server.url, name))
        df = spark.range(300_000).selectExpr(
            "concat('k', id) as key", "cast(cast(id as string) as binary) as value"
        )
        errors: list[BaseException] = []

        def write() -> None:
            try:
                kvstore.spark.register(spark)  # this thread's active session: see register
                df.coalesce(1).write.format("natskv").mode("append").option(
                    "servers", server.url
                ).save(name)
            except BaseException as exc:
                errors.append(exc)

        writer = threading.Thread(target=write)
        writer.start()
        deadline = time.monotonic() + 60
        while _run(lambda: _messages(server.url, f"KV_{name}")) < 1000:
            assert writer.is_alive() and time.monotonic() < deadline, [
                str(e)[-3000:] for e in errors
            ]
            time.sleep(0.02)
        server.kill()
        writer.join(timeout=90)
        assert not writer.is_alive(), "the job did not end"
    (error,) = errors
    text = str(error)
    assert "ConnectionReconnectingError" not in text.split("closing the connection")[0]
    assert "natskv: this task stored" in text
    real = ("CommitUnknownError", "RequestTimeoutError", "NoRespondersError")
    assert any(f"jetstream._errors.{name}" in text for name in real), text[-2000:]
