"""``writeStream.format("natskv")``: each micro-batch stored exactly once, whatever fails and
however late the replay. With ``atomicity=task`` (the default) every task stores its rows in
atomic batches that also advance the task's progress key; with ``atomicity=microBatch`` the
tasks hand their rows to the driver, which stores the whole micro-batch as one atomic batch
with the query's progress key. See ``_progress`` for the keys and ``_sink_store`` for how a
row is stored once."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from jetstream import BatchTooLargeError
from jetstream._options import run_sync
from jetstream._spark_task import TaskId

from ._options import Options
from ._progress import RawRow, query_key, task_key
from ._session import commit_deadline, writable_bucket
from ._sink_store import Limits, Report, store_rows

__all__ = ["KVSinkCommit", "KVStreamWriter", "TaskId"]

_log = logging.getLogger("kvstore.spark")


@dataclasses.dataclass
class KVSinkCommit(WriterCommitMessage):
    """What one task did: its report (``atomicity=task``), or its rows, for the driver to
    store (``atomicity=microBatch``)."""

    task: TaskId
    report: Report
    rows: list[RawRow] = dataclasses.field(default_factory=list)


class KVStreamWriter(DataSourceStreamArrowWriter):
    """Stores micro-batches exactly once (see the module docstring)."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts

    @property
    def limits(self) -> Limits:
        return Limits(
            capacity=self.opts.batch_size - 1,  # each batch also carries the progress key
            deadline=commit_deadline(self.opts),
            skip_bad=self.opts.on_bad_row == "skip",
        )

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KVSinkCommit:
        """Store this task's rows (or, with ``atomicity=microBatch``, hand them to the driver).

        Raises:
            BatchTooLargeError: ``microBatch`` and the task alone has more rows than a batch.
            As ``store_rows``: bad rows, a replay that differs, a failed batch (the error's
            note says what the task had stored).
        """
        task = TaskId.current("natskv")
        rows = _rows(iterator, self.opts)
        if self.opts.atomicity == "microBatch":
            if len(rows) > self.limits.capacity:  # fail the task now, not the commit later
                _whole_too_large(task.batch, len(rows), self.limits)
            return KVSinkCommit(task, Report(rows=len(rows)), rows)
        report = Report(rows=len(rows))
        if not rows:  # nothing to store, nothing to ask the server
            return KVSinkCommit(task, report)

        def stored(progress: Report) -> None:
            nonlocal report
            report = progress
            self.batch_stored(task, progress)

        try:
            report = run_sync(lambda: self._store(rows, task, stored))
        except Exception as exc:
            note = report.stored_note(task.batch)
            _log.error("%s: %s: %s", note, type(exc).__name__, exc)
            exc.add_note(note)
            raise
        return KVSinkCommit(task, report)

    def batch_stored(self, task: TaskId, report: Report) -> None:
        """Called in the task after each of its atomic batches is stored (``report`` so far);
        nothing by default. A subclass may watch a task's progress here."""

    async def _store(
        self, rows: Sequence[RawRow], task: TaskId, stored: Callable[[Report], None]
    ) -> Report:
        async with self.opts.connection.session() as js:
            bucket = await writable_bucket(js, self.opts)
            key = task_key(task.query, task.partition, self.opts.path_keys)
            return await store_rows(bucket, rows, key, task.batch, self.limits, on_batch=stored)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Log what the micro-batch stored; with ``atomicity=microBatch``, store it first.

        Raises:
            BatchTooLargeError: ``microBatch`` and more rows than one atomic batch takes.
            As ``store_rows``: bad rows, a replay that differs, a failed batch.
        """
        done = [m for m in messages if isinstance(m, KVSinkCommit)]
        if self.opts.atomicity == "microBatch" and done:
            report = run_sync(lambda: self._store_whole(done, batchId))
        else:
            report = _total(m.report for m in done)
        _log.info("natskv micro-batch %d committed: %s", batchId, _describe(report))

    async def _store_whole(self, messages: list[KVSinkCommit], batch: int) -> Report:
        rows = [row for m in sorted(messages, key=lambda m: m.task.partition) for row in m.rows]
        if not rows:
            return Report()
        async with self.opts.connection.session() as js:
            bucket = await writable_bucket(js, self.opts)
            key = query_key(messages[0].task.query, self.opts.path_keys)
            return await store_rows(bucket, rows, key, batch, self.limits, whole=True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Log what the successful tasks stored (each failed task says so in its error);
        a replay of the micro-batch stores the rest, nothing twice."""
        done = [m for m in messages if isinstance(m, KVSinkCommit)]
        failed = len(messages) - len(done)
        stored = (
            "nothing stored (atomicity=microBatch stores on commit only)"
            if self.opts.atomicity == "microBatch"
            else _describe(_total(m.report for m in done))
        )
        _log.warning(
            "natskv micro-batch %d aborted (%d of %d tasks failed); the successful tasks: "
            "%s. A replay of the micro-batch stores the rest, no row twice.",
            batchId,
            failed,
            len(messages),
            stored,
        )


def _total(reports: Iterable[Report]) -> Report:
    total = Report()
    for report in reports:
        total.rows += report.rows
        total.stored += report.stored
        total.skipped += report.skipped
        total.bad += report.bad
        total.batches += report.batches
    return total


def _describe(report: Report) -> str:
    text = f"{report.stored} rows stored in {report.batches} atomic batches"
    if report.skipped:
        text += f", {report.skipped} rows found stored already (a replay: not stored again)"
    if report.bad:
        text += f", {report.bad} bad rows left out"
    return text


def _whole_too_large(batch: int, rows: int, limits: Limits) -> None:
    raise BatchTooLargeError(
        f"natskv: a task of micro-batch {batch} has {rows} rows, more than one atomic batch "
        f"takes ({limits.capacity}); atomicity=microBatch stores a micro-batch whole or not "
        "at all. Nothing was stored."
    )


def _rows(batches: Iterator[pa.RecordBatch], opts: Options) -> list[RawRow]:
    """The task's rows, in input order, as the DataFrame holds them (checked when queued)."""
    rows: list[RawRow] = []
    for batch in batches:
        keys = batch.column(opts.key_column).to_pylist()
        values = batch.column(opts.value_column).to_pylist()
        ttls = batch.column(opts.ttl_column).to_pylist() if opts.ttl_column else None
        rows.extend(zip(keys, values, ttls or [None] * len(keys), strict=True))
    return rows
