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

import jetstream
import kvstore
from kvstore._compact import PURGES_IN_FLIGHT

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


class _PurgeSpy:
    """Wraps the context's ``purge_stream`` (the real request still goes to the server) to see
    how many purges are in flight at once, and to fail one on purpose."""

    def __init__(self, js: jetstream.JetStream, fail_at: int | None = None) -> None:
        self._purge = js.purge_stream
        self.in_flight = 0
        self.most = 0
        self.calls = 0
        self._fail_at = fail_at

    async def __call__(self, name: str, **options: Any) -> int:
        self.calls += 1
        if self.calls == self._fail_at:
            raise jetstream.JetStreamError("purge refused (test)")
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            return await self._purge(name, **options)
        finally:
            self.in_flight -= 1


async def _bucket_with_tombstones(make_bucket: Any, deleted: int) -> kvstore.Bucket:
    bucket: kvstore.Bucket = await make_bucket()
    await bucket.put_many({f"k{i}": b"v" for i in range(deleted)})
    await bucket.put("live", b"kept")
    async with bucket.batch() as batch:
        for i in range(deleted):
            batch.delete(f"k{i}")
    return bucket


async def test_purge_deletes_keeps_several_purges_in_flight(
    make_bucket: Any, js: jetstream.JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One purge per tombstone, awaited one at a time, made purge_deletes cost a round trip
    per deleted key end to end (100,000 tombstones: minutes). The old code never had more than
    one purge in flight."""
    bucket = await _bucket_with_tombstones(make_bucket, 300)
    spy = _PurgeSpy(js)
    monkeypatch.setattr(js, "purge_stream", spy)
    assert await bucket.purge_deletes(older_than=None) == 300
    assert 1 < spy.most <= PURGES_IN_FLIGHT, spy.most
    assert (await bucket.status()).values == 1
    assert [key async for key in bucket.keys()] == ["live"]


async def test_purge_deletes_raises_the_failed_purge_and_leaves_no_task(
    make_bucket: Any, js: jetstream.JetStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = await _bucket_with_tombstones(make_bucket, 300)
    spy = _PurgeSpy(js, fail_at=100)
    monkeypatch.setattr(js, "purge_stream", spy)
    with pytest.raises(jetstream.JetStreamError, match="purge refused"):
        await bucket.purge_deletes(older_than=None)
    purges = [t for t in asyncio.all_tasks() if getattr(t.get_coro(), "__name__", "") == "_purge"]
    assert not purges and spy.in_flight == 0, "purges left running after the failure"
    monkeypatch.undo()  # a second run finishes the job
    assert await bucket.purge_deletes(older_than=None) >= 300 - spy.calls
    assert [key async for key in bucket.keys()] == ["live"]
