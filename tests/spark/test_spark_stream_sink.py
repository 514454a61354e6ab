"""``writeStream.format("natskv")`` stores every input row as exactly one revision of its key,
in input order per key, after any failure and a restart from the checkpoint: a micro-batch
Spark replays, a Python worker SIGKILLed mid-write, the server restarted mid micro-batch, the
query stopped mid micro-batch. Each trial compares every key's revisions with the input
applied once. The driver SIGKILLed (a Spark start of its own) and the cluster trials are in
test_spark_stream_sink_failover.py (``-m spark_long``)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import pytest

import jetstream
import kvstore

pyspark = pytest.importorskip("pyspark", reason="needs the 'spark' extra")

from pyspark.errors import PySparkException  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql.types import StringType, StructField, StructType  # noqa: E402

from jetstream._consume.scan import scan_stream  # noqa: E402
from jetstream._errors import ColumnError  # noqa: E402
from jetstream._options import run_sync  # noqa: E402
from kvstore.spark import KVDataSource  # noqa: E402
from tests.spark import stream_sink_trials as trials  # noqa: E402
from tests.spark.stream_sink_trials import ROWS, Expected, HookedSource, start_query  # noqa: E402

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def hooked(spark: SparkSession) -> SparkSession:
    spark.dataSource.register(HookedSource)
    return spark


def test_a_query_stores_each_row_once_and_a_replayed_micro_batch_nothing(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("ss")
    trials.bucket(nats_server.url, name)
    inputs, expected = trials.inputs(tmp_path / "in")
    checkpoint = tmp_path / "checkpoint"
    query = trials.run(spark, inputs, checkpoint, **trials.options(nats_server.url, name))
    assert trials.revisions(nats_server.url, name, list(expected)) == expected
    assert query.lastProgress["batchId"] == 2

    trials.forget_commit(checkpoint, 2)  # Spark replays micro-batch 2 on restart
    end = trials.last_seq(nats_server.url, name)
    replay = trials.run(spark, inputs, checkpoint, **trials.options(nats_server.url, name))
    assert replay.lastProgress["batchId"] == 2 and replay.lastProgress["numInputRows"] == 2 * ROWS
    assert trials.last_seq(nats_server.url, name) == end, "the replay stored nothing"
    assert trials.revisions(nats_server.url, name, list(expected)) == expected


def test_a_python_worker_killed_mid_micro_batch(
    hooked: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("ss")
    trials.bucket(nats_server.url, name)
    inputs, expected = trials.inputs(tmp_path / "in")
    hook = trials.hook(tmp_path, 3, "kill")
    options = trials.options(nats_server.url, name, **hook)
    with pytest.raises(PySparkException, match=r"(?i)crash|worker|exit"):
        trials.run(hooked, inputs, tmp_path / "checkpoint", "natskv_hooked", **options)
    assert (tmp_path / "reached").exists()
    trials.run(hooked, inputs, tmp_path / "checkpoint", "natskv_hooked", **options)
    assert trials.revisions(nats_server.url, name, list(expected)) == expected


def test_a_server_restarted_mid_micro_batch(
    hooked: SparkSession, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    name = unique_name("ss")
    inputs, expected = trials.inputs(tmp_path / "in")
    hook = trials.hook(tmp_path, 2, "pause")
    with jetstream.EmbeddedServer() as server:
        trials.bucket(server.url, name)
        options = trials.options(server.url, name, **hook)
        query = start_query(
            hooked, inputs, str(tmp_path / "checkpoint"), "natskv_hooked", **options
        )
        try:
            trials.wait_for(tmp_path / "reached", "paused mid micro-batch")
            server.restart()
        finally:
            (tmp_path / "go").touch()
        query.awaitTermination()
        assert trials.revisions(server.url, name, list(expected)) == expected


def test_a_query_stopped_mid_micro_batch(
    hooked: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("ss")
    trials.bucket(nats_server.url, name)
    inputs, expected = trials.inputs(tmp_path / "in")
    hook = trials.hook(tmp_path, 2, "pause")
    options = trials.options(nats_server.url, name, **hook)
    checkpoint = tmp_path / "checkpoint"
    query = start_query(hooked, inputs, str(checkpoint), "natskv_hooked", **options)
    try:
        trials.wait_for(tmp_path / "reached", "paused mid micro-batch")
        query.stop()  # Spark cancels the micro-batch's tasks
    finally:
        (tmp_path / "go").touch()
    trials.run(hooked, inputs, checkpoint, "natskv_hooked", **options)
    found = trials.revisions(nats_server.url, name, list(expected))
    assert trials.differences(found, expected) == []


def test_micro_batch_atomicity_stores_a_micro_batch_as_one_atomic_batch(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("ss")
    trials.bucket(nats_server.url, name)
    inputs, expected = trials.inputs(tmp_path / "in")
    checkpoint = tmp_path / "checkpoint"
    options = {"servers": nats_server.url, "bucket": name, "atomicity": "microBatch"}
    trials.run(spark, inputs, checkpoint, **options)
    assert trials.revisions(nats_server.url, name, list(expected)) == expected
    # one atomic batch a micro-batch: 2 x 60 rows and the query's progress key, three times
    assert trials.last_seq(nats_server.url, name) == 3 * (2 * ROWS + 1)
    trials.forget_commit(checkpoint, 2)
    trials.run(spark, inputs, checkpoint, **options)
    assert trials.last_seq(nats_server.url, name) == 3 * (2 * ROWS + 1), "the replay stored nothing"

    small = unique_name("ss")
    trials.bucket(nats_server.url, small)
    with pytest.raises(PySparkException, match="more than one atomic batch"):
        trials.run(
            spark, inputs, tmp_path / "small", **{**options, "bucket": small, "batchSize": "100"}
        )
    assert trials.last_seq(nats_server.url, small) == 0, "nothing stored"


def test_a_bad_row_fails_its_task_before_it_stores_anything(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("ss")
    trials.bucket(nats_server.url, name)
    folder = tmp_path / "in"
    folder.mkdir()
    rows = [{"key": f"k{i}", "value": "v"} for i in range(20)]
    rows[15]["key"] = "a bad key"
    (folder / "rows.json").write_text("\n".join(map(json.dumps, rows)))
    with pytest.raises(PySparkException, match="row 15"):
        trials.run(
            spark, str(folder), tmp_path / "checkpoint", **trials.options(nats_server.url, name)
        )
    assert trials.last_seq(nats_server.url, name) == 0
    trials.run(
        spark,
        str(folder),
        tmp_path / "skip",
        **trials.options(nats_server.url, name, onBadRow="skip"),
    )
    assert (
        trials.last_seq(nats_server.url, name) == 19 + 3
    )  # 19 rows, a progress key per batch of 7


@pytest.mark.parametrize(
    ("option", "value", "error", "message"),
    [
        ("atomicity", "job", jetstream.ClientValidationError, "atomicity"),
        ("batchSize", "1", jetstream.ClientValidationError, "batchSize"),
        ("onBadRow", "log", jetstream.ClientValidationError, "onBadRow"),
        ("keyColumn", "nope", ColumnError, "nope"),
        ("numPartitions", "2", jetstream.ClientValidationError, "unknown option"),
    ],
)
def test_bad_stream_options_are_refused_at_planning(
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    option: str,
    value: str,
    error: type[Exception],
    message: str,
) -> None:
    name = unique_name("ss")
    trials.bucket(nats_server.url, name)
    source = KVDataSource(trials.options(nats_server.url, name, **{option: value}))
    with pytest.raises(error, match=message):
        source.streamWriter(
            StructType([StructField("key", StringType()), StructField("value", StringType())]),
            False,
        )


def test_a_query_with_a_bad_option_fails_when_it_starts(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("ss")
    trials.bucket(nats_server.url, name)
    inputs, _ = trials.inputs(tmp_path / "in", files=1)
    with pytest.raises(PySparkException, match="atomicity"):
        trials.run(
            spark,
            inputs,
            tmp_path / "checkpoint",
            **trials.options(nats_server.url, name, atomicity="job"),
        )
    assert trials.last_seq(nats_server.url, name) == 0


def test_an_encrypted_bucket_gets_each_row_once_encrypted(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("ss")
    trials.bucket(nats_server.url, name)
    key = bytes(range(32))
    key_file = tmp_path / "keys.json"
    key_file.write_text(
        json.dumps({"primary": "k1", "keys": {"k1": base64.b64encode(key).decode()}})
    )
    inputs, expected = trials.inputs(tmp_path / "in", files=2)
    trials.run(
        spark,
        inputs,
        tmp_path / "checkpoint",
        **trials.options(nats_server.url, name, keyFile=str(key_file)),
    )

    async def read() -> tuple[Expected, list[jetstream.StoredMessage]]:
        async with await jetstream.connect(nats_server.url) as js:
            ring = jetstream.Keyring({"k1": key}, primary="k1")
            bucket = await kvstore.open_bucket(js, name, encryption=ring)
            found = {k: [(e.op.value, e.value) for e in await bucket.history(k)] for k in expected}
            raw = [m async for m in scan_stream(js, f"KV_{name}", [f"$KV.{name}.>"])]
            return found, raw

    found, raw = run_sync(read)
    assert found == expected
    puts = [m for m in raw if m.data]
    assert puts and all(m.headers.get("Jetstore-Enc") == "v1;k1" for m in puts)
    plain = {value for revisions in expected.values() for _, value in revisions}
    assert not any(m.data in plain or b'"batch"' in m.data for m in puts), "stored encrypted"
