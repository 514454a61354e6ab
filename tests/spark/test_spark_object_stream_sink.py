"""``writeStream.format("natsobj")`` stores each row's object once and whole: a query over
three micro-batches into an encrypted store, one micro-batch replayed from the checkpoint
(nothing stored again), a bad row failing the micro-batch before anything of it is stored,
and options refused when the query starts. The failures that kill
processes are in test_spark_object_stream_sink_failover.py (``-m spark_long``)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import pytest

import jetstream
import objstore

pyspark = pytest.importorskip("pyspark", reason="needs the 'spark' extra")

from pyspark.errors import PySparkException  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql.types import BinaryType, StringType, StructField, StructType  # noqa: E402

from jetstream._errors import ColumnError  # noqa: E402
from objstore.spark import ObjectsDataSource  # noqa: E402
from tests.spark import object_sink_trials as trials  # noqa: E402
from tests.spark.object_sink_trials import OBJECTS  # noqa: E402
from tests.spark.stream_sink_trials import forget_commit  # noqa: E402

pytestmark = pytest.mark.spark


def test_a_query_stores_each_object_once_encrypted_and_a_replayed_micro_batch_nothing(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("os")
    trials.store(nats_server.url, name)
    key = bytes(range(32))
    key_file = tmp_path / "keys.json"
    key_file.write_text(
        json.dumps({"primary": "k1", "keys": {"k1": base64.b64encode(key).decode()}})
    )
    inputs, contents = trials.inputs(tmp_path / "in")
    checkpoint = tmp_path / "checkpoint"
    options = trials.options(nats_server.url, name, keyFile=str(key_file))
    with trials.meta_writes(nats_server.url, name) as writes:
        query = trials.run(spark, inputs, checkpoint, **options)
        assert query.lastProgress["batchId"] == 2
        assert query.lastProgress["sink"]["numOutputRows"] == OBJECTS
        end = trials.last_seq(nats_server.url, name)
        forget_commit(checkpoint, 2)  # Spark replays micro-batch 2 on restart
        replay = trials.run(spark, inputs, checkpoint, **options)
        assert replay.lastProgress["batchId"] == 2
        assert trials.last_seq(nats_server.url, name) == end, "the replay stored nothing"
    assert sorted(writes) == sorted(contents), "each object's meta record written once"
    ring = jetstream.Keyring({"k1": key}, primary="k1")
    assert trials.contents(nats_server.url, name, list(contents), ring) == contents
    raw = trials.contents(nats_server.url, name, ["out/0/1.txt"])  # without the key
    assert raw["out/0/1.txt"] != contents["out/0/1.txt"], "stored encrypted"


def test_a_bad_row_fails_its_micro_batch_before_anything_is_stored(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("os")
    trials.store(nats_server.url, name)
    inputs, _ = trials.inputs(tmp_path / "in", files=1)
    missing = tmp_path / "in" / "data" / "0-3"
    missing.unlink()  # a row's file is gone
    with pytest.raises(PySparkException, match=r"SourceNotFoundError[\s\S]*row 3"):
        trials.run(spark, inputs, tmp_path / "checkpoint", **trials.options(nats_server.url, name))
    assert trials.last_seq(nats_server.url, name) == 0, "nothing stored"
    skipping = ObjectsDataSource(trials.options(nats_server.url, name, onBadRow="SKIP"))
    assert skipping.streamWriter(_NAME_AND_DATA, False).opts.limits.skip_bad  # as stored
    # without Spark: test_object_stream_writes_store_each_object_once.py


_NAME_AND_DATA = StructType([StructField("name", StringType()), StructField("data", BinaryType())])


@pytest.mark.parametrize(
    ("option", "value", "schema", "error", "message"),
    [
        ("onBadRow", "log", _NAME_AND_DATA, jetstream.ClientValidationError, "onBadRow"),
        ("chunkSize", "0", _NAME_AND_DATA, jetstream.ClientValidationError, "chunkSize"),
        ("allowedRoot", "rel", _NAME_AND_DATA, jetstream.ClientValidationError, "absolute"),
        ("keyFile", "/nonexistent", _NAME_AND_DATA, jetstream.InvalidKeyringError, "nonexist"),
        ("dataColumn", "nope", _NAME_AND_DATA, ColumnError, "nope"),
        ("keys", ">", _NAME_AND_DATA, jetstream.ClientValidationError, "unknown option"),
        ("store", "absent", _NAME_AND_DATA, objstore.StoreNotFoundError, "absent"),
        (None, None, StructType([StructField("name", StringType())]), ColumnError, "data"),
        (None, None, StructType([StructField("data", BinaryType())]), ColumnError, "name"),
        (
            None,
            None,
            StructType([StructField("name", StringType()), StructField("data", StringType())]),
            ColumnError,
            "binary",
        ),
    ],
)
def test_bad_options_and_columns_are_refused_when_the_query_starts(
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    option: str | None,
    value: str | None,
    schema: StructType,
    error: type[Exception],
    message: str,
) -> None:
    name = unique_name("os")
    trials.store(nats_server.url, name)
    more = {} if option is None or value is None else {option: value}
    source = ObjectsDataSource({**trials.options(nats_server.url, name), **more})
    with pytest.raises(error, match=message):
        source.streamWriter(schema, False)
    with pytest.raises(jetstream.ClientValidationError, match="complete"):
        ObjectsDataSource(trials.options(nats_server.url, name)).streamWriter(_NAME_AND_DATA, True)
