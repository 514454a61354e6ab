"""What a natskv streaming task does with its rows, against a real server and without Spark:
every input row becomes exactly one revision of its key, in input order, however often the
task runs (a replay, a retry after it died midway, two attempts racing), and never half of an
atomic batch; a replay whose rows differ, or a bad row, stores nothing more."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

import pytest

import jetstream
import kvstore

pytest.importorskip("pyspark", reason="needs the 'spark' extra")

from kvstore.spark import SinkProgressError
from kvstore.spark._progress import task_key
from kvstore.spark._sink_store import Limits, Report, store_rows

pytestmark = pytest.mark.spark

BucketFactory = Callable[..., Awaitable[kvstore.Bucket]]
Row = tuple[Any, Any, Any]

LIMITS = Limits(capacity=7, deadline=10.0)
KEY = task_key("query-1", 0)


def _rows(count: int = 50, keys: int = 5, tag: str = "") -> list[Row]:
    """Keys written many times each, every eleventh row a delete."""
    return [
        (f"k{i % keys}", None if i % 11 == 10 else f"v{tag}{i}".encode(), None)
        for i in range(count)
    ]


def _applied_once(rows: Sequence[Row]) -> dict[str, list[tuple[str, bytes]]]:
    """Each key's revisions had every row been stored once, in order."""
    expected: dict[str, list[tuple[str, bytes]]] = {}
    for key, value, _ in rows:
        expected.setdefault(key, []).append(("DEL", b"") if value is None else ("PUT", value))
    return expected


async def _histories(bucket: kvstore.Bucket, keys: Sequence[str]) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for key in keys:
        with contextlib.suppress(kvstore.KeyNotFoundError):  # never written
            found[key] = [(e.op.value, e.value) for e in await bucket.history(key)]
    return found


async def _stored(bucket: kvstore.Bucket, rows: Sequence[Row]) -> dict[str, list[Any]]:
    return await _histories(bucket, sorted({r[0] for r in rows}))


class _Stop(Exception):
    """Stands for a task dying after some of its atomic batches."""


def _stop_after(batches: int) -> Callable[[Report], None]:
    def watch(report: Report) -> None:
        if report.batches == batches:
            raise _Stop

    return watch


async def test_a_replayed_task_stores_nothing_twice(make_bucket: BucketFactory) -> None:
    bucket = await make_bucket(history=64)
    rows = _rows()
    first = await store_rows(bucket, rows, KEY, 3, LIMITS)
    assert (first.stored, first.skipped, first.batches) == (50, 0, 8)
    again = await store_rows(bucket, rows, KEY, 3, LIMITS)
    assert (again.stored, again.skipped, again.batches) == (0, 50, 0)
    assert await _stored(bucket, rows) == _applied_once(rows)


async def test_a_task_that_died_midway_resumes_after_its_last_stored_batch(
    make_bucket: BucketFactory,
) -> None:
    bucket = await make_bucket(history=64)
    rows = _rows()
    with pytest.raises(_Stop):
        await store_rows(bucket, rows, KEY, 0, LIMITS, on_batch=_stop_after(3))
    assert await _stored(bucket, rows) == _applied_once(rows[:21])  # 3 whole batches
    retry = await store_rows(bucket, rows, KEY, 0, LIMITS)
    assert (retry.stored, retry.skipped) == (29, 21)
    assert await _stored(bucket, rows) == _applied_once(rows)


async def test_two_attempts_racing_store_each_row_once(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer
) -> None:
    name = (await make_bucket(history=64)).name
    rows = _rows(200)

    async def attempt() -> Report:
        async with await jetstream.connect(nats_server.url) as js:
            bucket = await kvstore.open_bucket(js, name)
            return await store_rows(bucket, rows, KEY, 0, LIMITS)

    reports = await asyncio.gather(attempt(), attempt())
    assert sum(r.stored for r in reports) == 200
    assert all(r.stored + r.skipped == 200 for r in reports)
    async with await jetstream.connect(nats_server.url) as js:
        bucket = await kvstore.open_bucket(js, name)
        assert await _stored(bucket, rows) == _applied_once(rows)


async def test_a_replay_of_a_micro_batch_older_than_the_last_stored_stores_nothing(
    make_bucket: BucketFactory,
) -> None:
    bucket = await make_bucket(history=64)
    older, newer = _rows(20, tag="a"), _rows(20, tag="b")
    await store_rows(bucket, older, KEY, 4, LIMITS)
    await store_rows(bucket, newer, KEY, 5, LIMITS)
    replay = await store_rows(bucket, older, KEY, 4, LIMITS)
    assert (replay.stored, replay.skipped) == (0, 20)
    assert await _stored(bucket, older) == _applied_once(older + newer)


async def test_a_replay_with_other_rows_fails_and_stores_nothing_more(
    make_bucket: BucketFactory,
) -> None:
    bucket = await make_bucket(history=64)
    rows = _rows()
    with pytest.raises(_Stop):
        await store_rows(bucket, rows, KEY, 0, LIMITS, on_batch=_stop_after(2))
    changed = [(rows[0][0], b"another value", None), *rows[1:]]
    with pytest.raises(SinkProgressError, match="not deterministic"):
        await store_rows(bucket, changed, KEY, 0, LIMITS)
    with pytest.raises(SinkProgressError, match="not deterministic"):
        await store_rows(bucket, rows[:10], KEY, 0, LIMITS)  # fewer rows than were stored
    assert await _stored(bucket, rows) == _applied_once(rows[:14])


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ("a key", kvstore.InvalidKeyError),
        (None, kvstore.InvalidKeyError),
        ("_jetstore.sink.query-1.0", kvstore.InvalidKeyError),
        ("_jetstore/sink/query-1/0", kvstore.InvalidKeyError),  # the same, as a path
    ],
)
async def test_a_bad_row_fails_the_task_before_anything_is_stored(
    make_bucket: BucketFactory, bad: Any, error: type[Exception]
) -> None:
    bucket = await make_bucket(history=64)
    rows = _rows()
    rows[30] = (bad, b"secret-value", None)
    with pytest.raises(error) as raised:
        await store_rows(bucket, rows, KEY, 0, LIMITS)
    assert any("row 30" in note for note in raised.value.__notes__)
    assert await _stored(bucket, rows[:30]) == {}
    assert await _histories(bucket, [KEY]) == {}


async def test_bad_rows_left_out_are_logged_without_their_value(
    make_bucket: BucketFactory, caplog: pytest.LogCaptureFixture
) -> None:
    bucket = await make_bucket(history=64)
    rows = _rows()
    rows[30] = ("a key", b"secret-value", None)
    rows[49] = ("k1", b"x" * (2 * 1024 * 1024), None)  # over the server's max payload
    limits = Limits(capacity=7, deadline=10.0, skip_bad=True)
    with caplog.at_level(logging.WARNING, logger="kvstore.spark"):
        report = await store_rows(bucket, rows, KEY, 0, limits)
    good = [r for i, r in enumerate(rows) if i not in (30, 49)]
    assert (report.stored, report.bad, report.skipped) == (48, 2, 0)
    assert await _stored(bucket, good) == _applied_once(good)
    assert "row 30" in caplog.text and "row 49" in caplog.text
    assert "secret-value" not in caplog.text and "xxxx" not in caplog.text
    again = await store_rows(bucket, rows, KEY, 0, limits)
    assert (again.stored, again.skipped) == (0, 50)


async def test_a_whole_micro_batch_is_one_atomic_batch_or_refused(
    make_bucket: BucketFactory,
) -> None:
    bucket = await make_bucket(history=64)
    rows = _rows(7)
    report = await store_rows(bucket, rows, "_jetstore.sink.query-1", 0, LIMITS, whole=True)
    assert (report.batches, report.last_revision - report.first_revision) == (1, 6)
    with pytest.raises(jetstream.BatchTooLargeError, match="Nothing was stored"):
        await store_rows(bucket, _rows(8), "_jetstore.sink.query-1", 1, LIMITS, whole=True)
    assert await _stored(bucket, rows) == _applied_once(rows)


async def test_a_key_written_again_with_a_ttl_starts_a_new_batch(
    make_bucket: BucketFactory,
) -> None:
    bucket = await make_bucket(history=10, marker_ttl=timedelta(seconds=1))
    rows: list[Row] = [("a", b"1", 60), ("b", b"1", None), ("a", b"2", 60), ("a", b"3", None)]
    report = await store_rows(bucket, rows, KEY, 0, LIMITS)
    assert (report.stored, report.batches) == (4, 2)
    # A key TTL on a bucket keeping history rolls the key's earlier revisions up (KV rules).
    assert await _stored(bucket, rows) == {
        "a": [("PUT", b"2"), ("PUT", b"3")],
        "b": [("PUT", b"1")],
    }
    assert (report.first_revision, report.last_revision) == (1, 5)  # a, b, progress; a, a


async def test_a_progress_key_another_client_wrote_stops_the_task_before_it_stores(
    make_bucket: BucketFactory,
) -> None:
    bucket = await make_bucket(history=64)
    await bucket.put(KEY, b"not the writer's")
    rows = _rows()
    with pytest.raises(SinkProgressError, match="reserved"):
        await store_rows(bucket, rows, KEY, 0, LIMITS)
    assert await _stored(bucket, rows) == {}


async def test_through_a_key_codec_any_text_is_a_key_and_replays_still_store_once(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer
) -> None:
    name = (await make_bucket(history=64)).name
    rows: list[Row] = [(f"user {i % 3} / naïve", f"v{i}".encode(), None) for i in range(20)]
    async with await jetstream.connect(nats_server.url) as js:
        bucket = await kvstore.open_bucket(js, name, key_codec=kvstore.Base64KeyCodec())
        first = await store_rows(bucket, rows, KEY, 0, LIMITS)
        again = await store_rows(bucket, rows, KEY, 0, LIMITS)
        assert (first.stored, again.stored, again.skipped) == (20, 0, 20)
        assert await _stored(bucket, rows) == _applied_once(rows)


async def test_through_a_path_codec_the_progress_key_is_a_path_and_replays_store_once(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer
) -> None:
    name = (await make_bucket(history=64)).name
    rows: list[Row] = [(f"/srv/app{i % 3}/conf", f"v{i}".encode(), None) for i in range(20)]
    key = task_key("query-1", 0, path_keys=True)
    async with await jetstream.connect(nats_server.url) as js:
        bucket = await kvstore.open_bucket(js, name, key_codec=kvstore.PathKeyCodec())
        first = await store_rows(bucket, rows, key, 0, LIMITS)
        again = await store_rows(bucket, rows, key, 0, LIMITS)
        assert (first.stored, again.stored, again.skipped) == (20, 0, 20)
        assert await _stored(bucket, rows) == _applied_once(rows)
        plain = await kvstore.open_bucket(js, name)
        assert (await plain.get("_jetstore.sink.query-1.0")).value  # stored as the dotted key
