"""``writeStream.format("natskv")`` stores every input row as exactly one revision of its key,
in input order per key, after any failure and a restart from the checkpoint: a micro-batch
Spark replays, a Python worker SIGKILLed mid-write, the server restarted mid micro-batch, the
driver SIGKILLed mid micro-batch. Each trial compares every key's revisions with the input
applied once."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import jetstream
import kvstore

pyspark = pytest.importorskip("pyspark", reason="needs the 'spark' extra")

from pyspark.errors import PySparkException  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from jetstream._consume.scan import scan_stream  # noqa: E402
from jetstream._options import run_sync  # noqa: E402
from tests.spark.spark_session import ROOT  # noqa: E402
from tests.spark.stream_sink_hooks import HookedSource, start_query  # noqa: E402

pytestmark = pytest.mark.spark

KEYS = 4  # per file
ROWS = 60  # per file: each key 15 times, every thirteenth row a delete
FILES = 6  # two a micro-batch: three micro-batches
Expected = dict[str, list[tuple[str, bytes]]]


@pytest.fixture(scope="module")
def hooked(spark: SparkSession) -> SparkSession:
    spark.dataSource.register(HookedSource)
    return spark


def _inputs(folder: Path, files: int = FILES) -> tuple[str, Expected]:
    """JSON files whose rows write the keys ``p<f % 2>.k<j>`` (two files of one micro-batch
    never share a key, so each key's revisions have one order); the revisions each key gets
    when every row is stored once, in order."""
    folder.mkdir()
    expected: Expected = {}
    for f in range(files):
        lines = []
        for r in range(ROWS):
            key, value = f"p{f % 2}.k{r % KEYS}", None if r % 13 == 12 else f"{f}.{r}"
            lines.append(json.dumps({"key": key, "value": value}))
            expected.setdefault(key, []).append(
                ("DEL", b"") if value is None else ("PUT", value.encode())
            )
        path = folder / f"part-{f:03}.json"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))  # the source takes oldest first
    return str(folder), expected


def _bucket(url: str, name: str, **options: Any) -> None:
    async def create() -> None:
        async with await jetstream.connect(url) as js:
            await kvstore.create_bucket(js, name, history=64, **options)

    run_sync(create)


def _revisions(url: str, name: str, keys: Iterator[str] | list[str]) -> Expected:
    async def read() -> Expected:
        async with await jetstream.connect(url) as js:
            bucket = await kvstore.open_bucket(js, name)
            return {k: [(e.op.value, e.value) for e in await bucket.history(k)] for k in keys}

    return run_sync(read)


def _last_seq(url: str, name: str) -> int:
    async def read() -> int:
        async with await jetstream.connect(url) as js:
            return (await js.stream_info(f"KV_{name}")).state.last_seq

    return run_sync(read)


def _wait_for(path: Path, what: str, alive: Callable[[], bool] = lambda: True) -> None:
    """Poll for a file the hooked writer creates (it runs in another process), while the
    process that should create it is ``alive``."""
    deadline = time.monotonic() + 120
    while not path.exists():
        assert alive() and time.monotonic() < deadline, f"never {what}"
        time.sleep(0.02)


def _run(
    spark: SparkSession, inputs: str, checkpoint: Path, fmt: str = "natskv", **opts: str
) -> Any:
    query = start_query(spark, inputs, str(checkpoint), fmt, **opts)
    query.awaitTermination()
    return query


def _options(url: str, name: str, **more: str) -> dict[str, str]:
    return {"servers": url, "bucket": name, "batchSize": "8", **more}


def test_a_query_stores_each_row_once_and_a_replayed_micro_batch_nothing(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("ss")
    _bucket(nats_server.url, name)
    inputs, expected = _inputs(tmp_path / "in")
    checkpoint = tmp_path / "checkpoint"
    query = _run(spark, inputs, checkpoint, **_options(nats_server.url, name))
    assert _revisions(nats_server.url, name, list(expected)) == expected
    assert query.lastProgress["batchId"] == 2

    (checkpoint / "commits" / "2").unlink()  # Spark replays micro-batch 2 on restart
    end = _last_seq(nats_server.url, name)
    replay = _run(spark, inputs, checkpoint, **_options(nats_server.url, name))
    assert replay.lastProgress["batchId"] == 2 and replay.lastProgress["numInputRows"] == 2 * ROWS
    assert _last_seq(nats_server.url, name) == end, "the replay stored nothing"
    assert _revisions(nats_server.url, name, list(expected)) == expected


def test_a_python_worker_killed_mid_micro_batch(
    hooked: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("ss")
    _bucket(nats_server.url, name)
    inputs, expected = _inputs(tmp_path / "in")
    hook = {
        "hookDir": str(tmp_path),
        "hookMicroBatch": "1",
        "hookBatches": "3",
        "hookAction": "kill",
    }
    options = _options(nats_server.url, name, **hook)
    with pytest.raises(PySparkException, match=r"(?i)crash|worker|exit"):
        _run(hooked, inputs, tmp_path / "checkpoint", "natskv_hooked", **options)
    assert (tmp_path / "reached").exists()
    _run(hooked, inputs, tmp_path / "checkpoint", "natskv_hooked", **options)
    assert _revisions(nats_server.url, name, list(expected)) == expected


def test_a_server_restarted_mid_micro_batch(
    hooked: SparkSession, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    name = unique_name("ss")
    inputs, expected = _inputs(tmp_path / "in")
    hook = {
        "hookDir": str(tmp_path),
        "hookMicroBatch": "1",
        "hookBatches": "2",
        "hookAction": "pause",
    }
    with jetstream.EmbeddedServer() as server:
        _bucket(server.url, name)
        options = _options(server.url, name, **hook)
        query = start_query(
            hooked, inputs, str(tmp_path / "checkpoint"), "natskv_hooked", **options
        )
        try:
            _wait_for(tmp_path / "reached", "paused mid micro-batch")
            server.restart()
        finally:
            (tmp_path / "go").touch()
        query.awaitTermination()
        assert _revisions(server.url, name, list(expected)) == expected


def test_the_driver_killed_mid_micro_batch(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("ss")
    _bucket(nats_server.url, name)
    inputs, expected = _inputs(tmp_path / "in")
    checkpoint = tmp_path / "checkpoint"
    hook = {
        "hookDir": str(tmp_path),
        "hookMicroBatch": "1",
        "hookBatches": "2",
        "hookAction": "pause",
    }
    args = {
        "inputs": inputs,
        "checkpoint": str(checkpoint),
        "options": _options(nats_server.url, name, **hook),
    }
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    driver = subprocess.Popen(
        [sys.executable, "-m", "tests.spark.stream_sink_driver", json.dumps(args)],
        cwd=ROOT,
        env=env,
        start_new_session=True,  # the driver and its JVM: killed together, as a lost machine
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(tmp_path / "reached", "paused mid micro-batch", lambda: driver.poll() is None)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    stored = _revisions(nats_server.url, name, list(expected))
    assert 0 < sum(map(len, stored.values())) < sum(map(len, expected.values()))
    _run(spark, inputs, checkpoint, **_options(nats_server.url, name))
    assert _revisions(nats_server.url, name, list(expected)) == expected


def test_micro_batch_atomicity_stores_a_micro_batch_as_one_atomic_batch(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("ss")
    _bucket(nats_server.url, name)
    inputs, expected = _inputs(tmp_path / "in")
    checkpoint = tmp_path / "checkpoint"
    options = {"servers": nats_server.url, "bucket": name, "atomicity": "microBatch"}
    _run(spark, inputs, checkpoint, **options)
    assert _revisions(nats_server.url, name, list(expected)) == expected
    # one atomic batch a micro-batch: 2 x 60 rows and the query's progress key, three times
    assert _last_seq(nats_server.url, name) == 3 * (2 * ROWS + 1)
    (checkpoint / "commits" / "2").unlink()
    _run(spark, inputs, checkpoint, **options)
    assert _last_seq(nats_server.url, name) == 3 * (2 * ROWS + 1), "the replay stored nothing"

    small = unique_name("ss")
    _bucket(nats_server.url, small)
    with pytest.raises(PySparkException, match="more than one atomic batch"):
        _run(spark, inputs, tmp_path / "small", **{**options, "bucket": small, "batchSize": "100"})
    assert _last_seq(nats_server.url, small) == 0, "nothing stored"


def test_a_bad_row_fails_its_task_before_it_stores_anything(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("ss")
    _bucket(nats_server.url, name)
    folder = tmp_path / "in"
    folder.mkdir()
    rows = [{"key": f"k{i}", "value": "v"} for i in range(20)]
    rows[15]["key"] = "a bad key"
    (folder / "rows.json").write_text("\n".join(map(json.dumps, rows)))
    with pytest.raises(PySparkException, match="row 15"):
        _run(spark, str(folder), tmp_path / "checkpoint", **_options(nats_server.url, name))
    assert _last_seq(nats_server.url, name) == 0
    _run(spark, str(folder), tmp_path / "skip", **_options(nats_server.url, name, onBadRow="skip"))
    assert _last_seq(nats_server.url, name) == 19 + 3  # 19 rows, a progress key per batch of 7


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("atomicity", "job", "atomicity"),
        ("batchSize", "1", "batchSize"),
        ("onBadRow", "log", "onBadRow"),
        ("keyColumn", "nope", "nope"),
        ("numPartitions", "2", "unknown option"),
    ],
)
def test_bad_stream_options_are_refused_when_the_query_starts(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
    option: str,
    value: str,
    message: str,
) -> None:
    name = unique_name("ss")
    _bucket(nats_server.url, name)
    inputs, _ = _inputs(tmp_path / "in", files=1)
    with pytest.raises(Exception, match=message):
        _run(
            spark,
            inputs,
            tmp_path / "checkpoint",
            **_options(nats_server.url, name, **{option: value}),
        )
    assert _last_seq(nats_server.url, name) == 0


def test_an_encrypted_bucket_gets_each_row_once_encrypted(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("ss")
    _bucket(nats_server.url, name)
    key = bytes(range(32))
    key_file = tmp_path / "keys.json"
    key_file.write_text(
        json.dumps({"primary": "k1", "keys": {"k1": base64.b64encode(key).decode()}})
    )
    inputs, expected = _inputs(tmp_path / "in", files=2)
    _run(
        spark,
        inputs,
        tmp_path / "checkpoint",
        **_options(nats_server.url, name, keyFile=str(key_file)),
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
