"""Streaming reads: a bucket's changes as micro-batches of stream sequences, resumable from a
checkpoint (refused when the bucket was deleted and created again since)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from jetstream import ClientValidationError, OrderedConsumer, StoredMessage
from jetstream._consume.ordered import range_window
from jetstream._options import run_sync

from .._errors import BucketNotFoundError
from .._models import Op, op_from_headers, stream_name, subject_prefix
from .._ranges import count_end
from ._options import Options, encryption_stage
from ._rows import row
from ._session import Offset, first_seq, stream_end, task_session

__all__ = ["KVStreamReader", "SeqRange"]


@dataclasses.dataclass
class SeqRange(InputPartition):
    """Stream sequences ``first`` .. ``last`` (inclusive)."""

    first: int
    last: int


class KVStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Key changes as a stream; offsets are ``{"seq": N, "created": T}``: the last revision
    included, and when the bucket's stream was created (checkpoints written before it was
    recorded hold ``{"seq": N}`` alone, and are resumed unchecked)."""

    def __init__(self, opts: Options, projection: tuple[tuple[str, bool], ...]) -> None:
        self.opts = opts
        self.projection = projection
        self._target: Offset | None = None

    def initialOffset(self) -> Offset:
        start = self.opts.start
        if start not in ("earliest", "latest") and not start.isdigit():
            raise ClientValidationError(
                f"startingSequence must be earliest, latest or a revision: {start!r}"
            )
        end = run_sync(lambda: stream_end(self.opts))
        if start == "latest":
            return end
        return {**end, "seq": 0 if start == "earliest" else max(0, int(start) - 1)}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_records:
            return ReadMaxRows(self.opts.max_records)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = run_sync(lambda: stream_end(self.opts))

    def latestOffset(self, start: Offset | None = None, limit: ReadLimit | None = None) -> Offset:
        """The offset the next micro-batch ends at.

        Raises:
            BucketNotFoundError: the bucket does not exist, or was deleted and created again
                since ``start`` (the checkpoint's bucket is gone; its revisions start over).
        """
        end = self._target if self._target is not None else run_sync(lambda: stream_end(self.opts))
        if start is not None:
            _check_same_bucket(self.opts.bucket, start, end)
        if start is not None and isinstance(limit, ReadMaxRows):
            after, latest, rows = int(start["seq"]), int(end["seq"]), limit.max_rows
            end = {**end, "seq": run_sync(lambda: _rows_end(self.opts, after, latest, rows))}
        return end

    def partitions(self, start: Offset, end: Offset) -> list[SeqRange]:
        step = self.opts.seqs_per_partition
        first, last = int(start["seq"]) + 1, int(end["seq"])
        if last - first >= step:  # several partitions: none for sequences the stream dropped
            first = max(first, run_sync(lambda: first_seq(self.opts)))
        return [SeqRange(s, min(s + step - 1, last)) for s in range(first, last + 1, step)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, SeqRange)
        yield from run_sync(lambda: _read_range(self.opts, self.projection, partition))

    def commit(self, end: Offset) -> None:
        """Nothing to do: offsets are stream sequences, no server-side state is kept."""


def _check_same_bucket(bucket: str, start: Offset, end: Offset) -> None:
    """Raises BucketNotFoundError: ``start`` was taken on an earlier bucket of the same name.

    Resuming there would read the new bucket from the old one's revision on, silently
    skipping its first changes (as Spark's Kafka source fails on data loss, so does this)."""
    before = start.get("created")
    if before and end.get("created") and before != end["created"]:
        raise BucketNotFoundError(
            bucket,
            f"bucket {bucket!r} was deleted and created again since this query's checkpoint "
            f"(created {before}, now {end['created']}): its revisions started over; start the "
            "query with a new checkpoint location to read the new bucket",
        )


async def _rows_end(opts: Options, after: int, latest: int, rows: int) -> int:
    """Where a micro-batch of at most ``rows`` rows starting after ``after`` ends: rows are
    counted (the messages matching the key filters, deletes and markers only when they are
    rows), not stream sequences, so a filtered or history-1 bucket still gets full batches."""

    def counts(headers: dict[str, str]) -> bool:
        return opts.include_deletes or op_from_headers(headers) is Op.PUT

    async with opts.connection.session() as js:
        stream = stream_name(opts.bucket)
        return await count_end(js, stream, opts.subjects, after, latest, rows, counts)


async def _read_range(
    opts: Options, projection: tuple[tuple[str, bool], ...], part: SeqRange
) -> list[tuple[Any, ...]]:
    prefix = subject_prefix(opts.bucket)
    stage = encryption_stage(opts)
    rows = []
    async with (
        task_session(opts) as js,
        OrderedConsumer(
            js,
            stream_name(opts.bucket),
            filter_subjects=opts.subjects,
            opt_start_seq=part.first,
            until_caught_up=True,
            max_messages=range_window(part.first, part.last),
        ) as consumer,
    ):
        async for message in consumer:
            meta = message.metadata
            if meta.stream_seq > part.last:
                break
            if opts.include_deletes or op_from_headers(message.headers) is Op.PUT:
                stored = StoredMessage(
                    subject=message.subject,
                    seq=meta.stream_seq,
                    time_ns=meta.time_ns,
                    headers=message.headers,
                    data=message.data,
                )
                rows.append(row(stored, prefix, projection, stage, opts.bucket, opts.key_codec))
    return rows
