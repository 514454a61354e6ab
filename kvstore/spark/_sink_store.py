"""Storing a streaming write's rows exactly once (no Spark here: the tasks and the driver call
it): the rows not yet stored, in input order, cut into atomic batches that each also advance
the progress key on the condition that it is still at the revision read, so two attempts
racing (a speculative task, a zombie) or a replay never store a row twice."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence

from jetstream import BatchTooLargeError, ClientValidationError, WrongLastSequenceError

from .._batch import KeyBatch
from .._bucket import Bucket
from .._errors import InvalidKeyError, KeyExistsError, WrongRevisionError
from ._progress import RESERVED, Progress, RawRow, RowDigest, SinkProgressError, read_progress

__all__ = ["Report", "store_rows"]

_log = logging.getLogger("kvstore.spark")


@dataclasses.dataclass
class Report:
    """What one writer (a task, or the driver for a whole micro-batch) did with its rows."""

    rows: int = 0
    """Input rows."""
    stored: int = 0
    """Rows this attempt stored."""
    skipped: int = 0
    """Rows found stored already (by an earlier or concurrent attempt): not stored again."""
    bad: int = 0
    """Bad rows left out (``onBadRow=skip``)."""
    batches: int = 0
    """Atomic batches this attempt stored."""
    first_revision: int = 0
    last_revision: int = 0

    def stored_note(self, batch: int) -> str:
        """What stays stored of micro-batch ``batch`` when this writer fails."""
        if not self.batches:
            return f"natskv: this task stored no row of micro-batch {batch} before it failed"
        return (
            f"natskv: this task stored {self.stored} rows of micro-batch {batch} in "
            f"{self.batches} atomic batches (revisions {self.first_revision}.."
            f"{self.last_revision}) before it failed; they stay stored, and a replay of the "
            "micro-batch does not store them again"
        )


@dataclasses.dataclass
class _Chunk:
    """Input rows ``start``..``end`` (bad ones left out), queued in one atomic batch."""

    batch: KeyBatch
    start: int
    end: int = 0
    bad: int = 0
    digest: str = ""

    @property
    def writes(self) -> int:
        return len(self.batch)


@dataclasses.dataclass(frozen=True)
class Limits:
    """How a writer cuts and commits: ``capacity`` rows per atomic batch (its progress write
    comes on top), ``deadline`` seconds to resolve a commit (and to wait out attempts that
    race it), ``skip_bad`` rows instead of failing."""

    capacity: int
    deadline: float
    skip_bad: bool = False


async def store_rows(
    bucket: Bucket,
    rows: Sequence[RawRow],
    key: str,
    batch: int,
    limits: Limits,
    *,
    whole: bool = False,
    on_batch: Callable[[Report], None] | None = None,
) -> Report:
    """Store the rows of micro-batch ``batch`` that progress key ``key`` does not list as
    stored yet, in input order, every row once. ``whole``: in one atomic batch or not at all.
    Every row to store is checked before the first batch is sent. ``on_batch`` is called
    after each atomic batch is stored.

    Raises:
        InvalidKeyError, ValueTooLargeError, InvalidTTLError, ClientValidationError: a bad
            row (without ``skip_bad``), before anything is stored; the error's note names it.
        BatchTooLargeError: ``whole`` and the rows need more than one atomic batch.
        SinkProgressError: the rows stored before are not the first of ``rows``.
        CommitUnknownError, BucketNotFoundError, JetStreamError: a batch failed (the ones
            before it stay stored, and the progress key says so).
    """
    report = Report(rows=len(rows))
    progress = await read_progress(bucket, key)
    start = progress.stored_rows(batch, rows)
    chunks = _prepare(bucket, rows, start, limits, batch)
    _check_whole(whole, chunks, limits, batch)
    loop = asyncio.get_running_loop()
    raced_until = loop.time() + limits.deadline
    while chunks:
        chunk = chunks[0]
        _queue_progress(chunk, progress, batch)
        try:
            await chunk.batch.commit()
        except WrongLastSequenceError as exc:  # another attempt advanced the key (or is)
            progress = await read_progress(bucket, key, _current(exc))
            done = progress.stored_rows(batch, rows)
            if done < chunk.start:
                raise SinkProgressError(
                    f"natskv: progress key {key!r} went back to {done} rows of micro-batch "
                    f"{batch} while {chunk.start} were stored: another writer changed it"
                ) from exc
            if done == chunk.start:  # no attempt got further: a stale read, or one in flight
                if loop.time() >= raced_until:
                    raise
                await asyncio.sleep(0.05)
            else:
                raced_until = loop.time() + limits.deadline
            chunks = _prepare(bucket, rows, done, limits, batch)
            continue
        progress = _committed(chunk, progress, batch, report)
        if on_batch is not None:
            on_batch(report)
        chunks.pop(0)
    report.skipped = report.rows - report.stored - report.bad
    return report


def _current(exc: WrongLastSequenceError) -> int | None:
    """The progress key's revision the server (or the client's look-up) reported."""
    if isinstance(exc, WrongRevisionError):
        return exc.current or None
    if isinstance(exc, KeyExistsError):  # a create found the key: at this revision
        return exc.revision or None
    return None


def _queue_progress(chunk: _Chunk, progress: Progress, batch: int) -> None:
    value = progress.advanced(batch, chunk.end, chunk.digest)
    if progress.revision:
        chunk.batch.update(progress.key, value, progress.revision)
    else:
        chunk.batch.create(progress.key, value)


def _committed(chunk: _Chunk, progress: Progress, batch: int, report: Report) -> Progress:
    """Count a stored chunk in ``report``; the progress key as it now stands."""
    revisions = chunk.batch.revisions or {}
    revision = revisions[progress.key]
    data = chunk.writes - 1
    report.stored += data
    report.bad += chunk.bad
    report.batches += 1
    if data:
        first = revision - data  # the batch's messages are contiguous, the progress last
        report.first_revision = report.first_revision or first
        report.last_revision = revision - 1
    return Progress(progress.key, revision, batch, chunk.end, chunk.digest)


def _check_whole(whole: bool, chunks: list[_Chunk], limits: Limits, batch: int) -> None:
    if whole and len(chunks) > 1:
        rows = sum(c.writes for c in chunks)
        raise BatchTooLargeError(
            f"natskv: micro-batch {batch} has {rows} rows to store, more than one atomic batch "
            f"takes ({limits.capacity} rows: batchSize less the progress key; a key written "
            "again with a TTL also starts a new batch); use atomicity=task, or make the "
            "micro-batches smaller (the source's maxRecordsPerTrigger, maxFilesPerTrigger). "
            "Nothing was stored."
        )


def _prepare(
    bucket: Bucket, rows: Sequence[RawRow], start: int, limits: Limits, batch: int
) -> list[_Chunk]:
    """Rows ``start``.. queued in atomic batches of at most ``capacity`` rows, each ending
    with the digest of every input row up to its end; a bad row raises (or is left out, with
    ``skip_bad``), so nothing is sent unless every row can be."""
    chunks = [_Chunk(_new_batch(bucket, limits), start)]
    keys: set[str] = set()
    for index in range(start, len(rows)):
        key, value, ttl = rows[index]
        current = chunks[-1]
        # The server refuses a TTL (a rollup, with history) on a key already in the batch.
        if current.writes >= limits.capacity or (ttl is not None and key in keys):
            current.end = index
            chunks.append(_Chunk(_new_batch(bucket, limits), index))
            keys.clear()
        try:
            _queue_row(chunks[-1].batch, key, value, ttl)
        except ClientValidationError as exc:
            if not limits.skip_bad:
                exc.add_note(
                    f"natskv: row {index} of this writer's share of micro-batch {batch} is "
                    "bad, so none of its rows was stored now (onBadRow=skip leaves bad rows out)"
                )
                raise
            _log.warning(
                "natskv: row %d of micro-batch %d left out (onBadRow=skip): %s: %s",
                index,
                batch,
                type(exc).__name__,
                exc,
            )
            chunks[-1].bad += 1
            continue
        keys.add(key)
    chunks[-1].end = len(rows)
    digest = RowDigest(rows[:start])
    for chunk in chunks:
        digest.update(rows[chunk.start : chunk.end])
        chunk.digest = digest.hexdigest()
    return [c for c in chunks if c.end > c.start]


def _new_batch(bucket: Bucket, limits: Limits) -> KeyBatch:
    return bucket.batch(max_keys=limits.capacity + 1, deadline=limits.deadline, repeats=True)


def _queue_row(batch: KeyBatch, key: object, value: object, ttl: object) -> None:
    """Queue one row: a null value deletes the key.

    Raises:
        InvalidKeyError: not a string, a reserved key, or one the KV rules refuse.
        ValueTooLargeError, InvalidTTLError, WrongTypeError: a bad value or TTL.
    """
    if not isinstance(key, str):
        raise InvalidKeyError(f"keys must be strings, got {type(key).__name__}")
    if key.startswith(RESERVED):
        raise InvalidKeyError(
            f"key {key!r}: keys under {RESERVED[0]!r} are the stream writer's own"
        )
    if value is None:
        batch.delete(key)
    else:
        batch.put(key, value.encode() if isinstance(value, str) else value, ttl=ttl)  # type: ignore[arg-type]
