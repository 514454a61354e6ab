"""The benchmark runner works end to end (a smoke run; timings are not asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def test_benchmark_runner_prints_a_table(tmp_path: Path) -> None:
    report = tmp_path / "report.md"
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--rounds", "1", "--sizes", "10", "--get-size",
         "10", "--cas-writes", "5", "--watch-keys", "200", "--watch-updates", "100",
         "--watch-rounds", "1",
         "--object-sizes", "1", "--object-rounds", "1", "--rss-mib", "4",
         "--pcg-messages", "100", "--pcg-rounds", "1",
         "--write", str(report)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    text = report.read_text()
    for variant in (
        "kvstore put_many", "nats-py kv.put sequential", "hand-written", "get_many",
        "kvstore watch()", "nats-py kv.watchall()",
        "kvstore update refused", "kvstore create refused", "objstore put", "nats-py obs.get",
        "acked fallback",
        "4-member elastic group, 4 processes", "4-member elastic group, 1 process", "1 consumer",
    ):  # fmt: skip
        assert variant in text
    assert "Machine:" in text and "nats-server" in text
    assert "peak RSS" in text and "put 4 MiB" in text
    for timing in ("after", "during"):
        for kind in ("put_many", "put"):
            assert f"updates {timing} the snapshot ({kind})" in text


def test_frame_reader_benchmark_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.frames", "--frames", "500", "--rounds", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    for reader in ("nats-py Parser", "FrameParser, routed", "FrameParser, handed to nats-py"):
        assert f"| {reader} |" in result.stdout


def test_object_cpu_benchmark_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.object_cpu", "--mib", "2", "--rounds", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    for row in ("ordered consumer, no hash", "open()", "core publish, no acks", "put"):
        assert f"| {row} |" in result.stdout


@pytest.mark.spark
def test_spark_benchmark_runs() -> None:
    pytest.importorskip("pyspark", reason="needs the 'spark' extra")
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.spark_kv", "2000"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "natskv write" in result.stdout and "per-row put loop" in result.stdout


@pytest.mark.spark
def test_spark_read_benchmark_runs() -> None:
    """The partition-read comparison (no Spark session: the partitions run in processes)."""
    pytest.importorskip("pyspark", reason="needs the 'spark' extra")
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.spark_kv_read", "--processes", "--keys", "2000",
         "--rounds", "1", "--history", "3", "--partitions", "1", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "earlier: hash share" in result.stdout and "| 2 |" in result.stdout
