"""Findings of the cost curves (``benchmarks/curves.py``): scans cost per message what a watch
does, and the curves benchmark itself produces every row and its plot."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Coroutine, Generator
from pathlib import Path
from typing import Any

import pytest

import kvstore

ROOT = Path(__file__).parents[2]
KEYS = 2000


class _TaskCounter:
    """Counts the tasks the running loop creates while installed (a task factory)."""

    def __init__(self) -> None:
        self.created = 0

    def __call__(
        self,
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine[Any, Any, Any] | Generator[Any, None, Any],
        **kwargs: Any,
    ) -> asyncio.Future[Any]:
        self.created += 1
        return asyncio.Task(coro, loop=loop, **kwargs)


async def test_keys_scan_starts_no_task_per_key(make_bucket: Any) -> None:
    """keys() (like every until-caught-up scan) waited for each message through
    ``asyncio.wait_for``, a task and a timer per message: twice a watch's cost per key, and on
    the old code this test counted about one task per key."""
    bucket: kvstore.Bucket = await make_bucket()
    for start in range(0, KEYS, 1000):
        await bucket.put_many({f"k{i}": b"v" for i in range(start, start + 1000)})
    loop = asyncio.get_running_loop()
    counter = _TaskCounter()
    loop.set_task_factory(counter)  # type: ignore[arg-type]
    try:
        keys = [key async for key in bucket.keys()]
    finally:
        loop.set_task_factory(None)
    assert len(keys) == KEYS
    # The consumer's puller and its clean-up need a few; nothing may scale with the keys.
    assert counter.created < 50, counter.created


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
