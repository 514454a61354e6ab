"""An entry's time is the server's, to the nanosecond, whichever read found it (get, a get of
a revision, history, watch, typed views), and ``created`` is that time as a UTC datetime."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import jetstream
import kvstore
from jetstream._protocol.message import time_of_ns


async def test_every_read_of_a_revision_gives_the_same_time(bucket: kvstore.Bucket) -> None:
    revisions = [await bucket.put("k", b"%d" % i) for i in range(5)]  # its history: 5
    latest = await bucket.get("k")
    by_revision = [await bucket.get("k", revision=r) for r in revisions]
    history = await bucket.history("k")
    async with bucket.watch("k", include_history=True) as watcher:
        watched = [entry async for entry in watcher.initial()]
    times = [entry.created_ns for entry in by_revision]
    assert times == [e.created_ns for e in history] == [e.created_ns for e in watched]
    assert latest.created_ns == times[-1]
    assert times == sorted(times) and any(ns % 1000 for ns in times)
    assert [e.created for e in watched] == [time_of_ns(ns) for ns in times]
    assert latest.created.tzinfo is UTC


async def test_typed_entries_carry_the_same_time(bucket: kvstore.Bucket) -> None:
    await bucket.put("user", b'{"name": "Ada"}')
    raw = await bucket.get("user")
    entry = await bucket.typed(dict).get("user")
    assert (entry.created_ns, entry.created) == (raw.created_ns, raw.created)


async def test_decode_entry_refuses_a_time_without_a_zone(bucket: kvstore.Bucket) -> None:
    subject = f"$KV.{bucket.name}.k"
    with pytest.raises(jetstream.WrongTypeError, match="time zone"):
        bucket.decode_entry(subject, b"v", revision=1, created=datetime(2026, 1, 1), headers={})
    when = datetime(2026, 1, 1, 12, tzinfo=UTC)
    entry = bucket.decode_entry(subject, b"v", revision=1, created=when, headers={})
    assert entry.created == when
