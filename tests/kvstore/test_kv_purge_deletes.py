"""``purge_deletes`` keeps several purges in flight (one per tombstone, awaited one at a time, cost
a round trip per deleted key end to end), and a failed purge is raised with none left running."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import jetstream
import kvstore
from kvstore._compact import PURGES_IN_FLIGHT


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
