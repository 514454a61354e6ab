"""The benchmark runner works end to end (a smoke run; timings are not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def _run(module: str, *args: str, timeout: float) -> str:
    """``python -m <module> <args>`` from the project root; its output, after checking that
    it exited 0."""
    result = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_benchmark_runner_prints_a_table(tmp_path: Path) -> None:
    report = tmp_path / "report.md"
    _run(
        "benchmarks", "--rounds", "1", "--sizes", "10", "--get-size", "10", "--cas-writes", "5",
        "--watch-keys", "200", "--watch-updates", "100", "--watch-rounds", "1",
        "--object-sizes", "1", "--object-rounds", "1", "--rss-mib", "4",
        "--pcg-messages", "100", "--pcg-rounds", "1", "--sync-ops", "10",
        "--sync-watch-keys", "100", "--sync-rounds", "1", "--replication-rounds", "0",
        "--lock-ops", "3", "--write", str(report), timeout=120,
    )  # fmt: skip
    text = report.read_text()
    for variant in (
        "kvstore put_many", "nats-py kv.put sequential", "hand-written", "get_many",
        "kvstore watch()", "nats-py kv.watchall()",
        "kvstore update refused", "kvstore create refused", "objstore put", "nats-py obs.get",
        "acked fallback",
        "4-member elastic group, 4 processes", "4-member elastic group, 1 process", "1 consumer",
        "kvstore.sync (blocking)", "blocking client: 10 single puts", "watch a 100-key snapshot",
        "kvstore lock() (async with)", "kvstore put_many(fence=lease)",
    ):  # fmt: skip
        assert variant in text
    assert "Machine:" in text and "nats-server" in text
    assert "peak RSS" in text and "put 4 MiB" in text
    for timing in ("after", "during"):
        for kind in ("put_many", "put"):
            assert f"updates {timing} the snapshot ({kind})" in text


def test_replication_benchmark_compares_an_r3_cluster_with_one_server() -> None:
    output = _run(
        "benchmarks.replication", "--rounds", "1", "--put-sizes", "10", "--get-size", "10",
        "--writes", "3", "--watch-keys", "100", "--watch-updates", "50", "--object-mib", "1",
        "--messages", "20", timeout=120,
    )  # fmt: skip
    assert "R1, one server" in output and "R3, 3-node cluster" in output
    table = output.split("| scenario |", 1)[1]
    for row in (
        "put 10 keys", "get 10 keys", "CAS 3 writes", "snapshot alone", "50 updates during",
        "put 1 MiB", "get 1 MiB", "max_ack_pending=1 ", "max_ack_pending=1000",
        "durable consumers",
    ):  # fmt: skip
        assert row in table
    assert "n/a" not in table  # the servers' CPU was read


def test_frame_reader_benchmark_runs() -> None:
    output = _run("benchmarks.frames", "--frames", "500", "--rounds", "1", timeout=60)
    for reader in ("nats-py Parser", "FrameParser, routed", "FrameParser, handed to nats-py"):
        assert f"| {reader} |" in output


def test_watch_cpu_benchmark_reports_each_process() -> None:
    output = _run(
        "benchmarks.watch_cpu", "--keys", "500", "--updates", "100", "--rounds", "1", timeout=120
    )
    for variant in ("kvstore watch()", "nats-py kv.watchall()"):
        (row,) = [line for line in output.splitlines() if line.startswith(f"| {variant} |")]
        wall, watcher, server, writer, _ = (float(cell) for cell in row.split("|")[2:7])
        assert wall > 0 and watcher > 0 and min(server, writer) >= 0, row  # ticks of 10 ms


def test_watch_window_benchmark_reports_each_window_beside_nats_py() -> None:
    output = _run(
        "benchmarks.watch_window",
        *("--windows", "50", "1000", "--keys", "500", "--updates", "100", "--rounds", "1"),
        timeout=120,
    )
    for variant in ("kvstore watch(), window 50", "kvstore watch(), window 1,000", "nats-py"):
        (row,) = [line for line in output.splitlines() if line.startswith(f"| {variant}")]
        assert float(row.split("|")[2]) > 0 and row.split("|")[3].strip().endswith("x"), row


def test_object_cpu_benchmark_runs() -> None:
    output = _run("benchmarks.object_cpu", "--mib", "2", "--rounds", "1", timeout=120)
    for row in ("ordered consumer, no hash", "open()", "core publish, no acks", "put"):
        assert f"| {row} |" in output


@pytest.mark.spark
def test_spark_benchmark_runs(spark: object) -> None:
    """In the test session's Spark (a Spark start of its own cost more than the run)."""
    pytest.importorskip("pyspark", reason="needs the 'spark' extra")
    from benchmarks.spark_kv import measure

    output = measure(500, spark)
    assert "natskv write" in output and "per-row put loop" in output


@pytest.mark.spark
def test_spark_stream_benchmark_runs(spark: object) -> None:
    """The stream writer against the batch writer and a per-row foreachBatch, in the test
    session's Spark."""
    pytest.importorskip("pyspark", reason="needs the 'spark' extra")
    from benchmarks.spark_stream import measure

    output = measure(500, spark)
    for variant in ("natskv batch write", "natskv stream write", "foreachBatch, a put per row"):
        assert f"| {variant}" in output


@pytest.mark.spark
def test_spark_read_benchmark_runs() -> None:
    """The partition-read comparison (no Spark session: the partitions run in processes)."""
    pytest.importorskip("pyspark", reason="needs the 'spark' extra")
    output = _run(
        "benchmarks.spark_kv_read", "--processes", "--keys", "2000", "--rounds", "1",
        "--history", "3", "--partitions", "1", "2", timeout=300,
    )  # fmt: skip
    assert "earlier: hash share" in output and "| 2 |" in output


def test_curves_benchmark_writes_every_row_and_a_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plot step needs the 'bench' extra")
    from benchmarks import curves

    data = tmp_path / "curves.json"
    png = tmp_path / "curves.png"
    run = [sys.executable, "-m", "benchmarks.curves", "--keys", "1000", "--objects", "1"]
    result = subprocess.run(
        [*run, "--json", str(data)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(data.read_text())["rows"]
    assert {(row["op"], row["size"]) for row in rows} == {
        *((op, 1000) for op in curves.KV_OPS),
        *((op, 1) for op in curves.OBJECT_OPS),
    }
    for row in rows:
        assert row["seconds"] > 0 and row["rss_peak_mib"] >= row["rss_before_mib"] > 0
    assert "| keys() | 1,000 keys |" in result.stdout
    plotted = subprocess.run(
        [sys.executable, "-m", "benchmarks.curves", "--plot", str(data), "--png", str(png)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert plotted.returncode == 0, plotted.stderr
    assert png.read_bytes().startswith(b"\x89PNG")
