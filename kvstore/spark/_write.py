"""Writing DataFrames into a bucket: the columns checked on the driver, each partition stored
in atomic ``put_many`` batches, and what a job stored logged when it ends."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from jetstream import ClientValidationError, JetStreamError
from jetstream._errors import ColumnError
from jetstream._options import run_sync

from .._manage import bucket_info
from ._options import Options
from ._session import commit_deadline, last_seq, writable_bucket

__all__ = ["KVArrowWriter", "KVCommit", "check_bucket", "write_columns"]

_log = logging.getLogger("kvstore.spark")


# Arrow-side type names Spark columns may have: what each written column accepts.
_KEY_TYPES = ("string",)
_VALUE_TYPES = ("binary", "string")
_TTL_TYPES = ("byte", "short", "integer", "long", "string", "void")


def write_columns(opts: Options, schema: StructType) -> Options:
    """Resolve the key/value/ttl columns case-insensitively (as Spark does) to the DataFrame's
    own spelling and check their types, so a wrong column fails on the driver, not in tasks."""
    fields = {field.name.lower(): field for field in schema.fields}

    def resolve(option: str, column: str, types: tuple[str, ...]) -> str:
        field = fields.get(column.lower())
        if field is None:
            raise ColumnError(
                f"natskv: column {column!r} ({option}) is not in the DataFrame: "
                f"{schema.fieldNames()}"
            )
        type_name = field.dataType.typeName()
        if type_name not in types:
            raise ColumnError(
                f"natskv: column {field.name!r} ({option}) has type {field.dataType.simpleString()}"
                f"; it must be one of {', '.join(types)}"
            )
        return str(field.name)

    ttl = opts.ttl_column
    return dataclasses.replace(
        opts,
        key_column=resolve("keyColumn", opts.key_column, _KEY_TYPES),
        value_column=resolve("valueColumn", opts.value_column, _VALUE_TYPES),
        ttl_column=None if ttl is None else resolve("ttlColumn", ttl, _TTL_TYPES),
    )


async def check_bucket(opts: Options) -> int:
    """Check the bucket takes atomic batches; its last revision (what the job starts from)."""
    async with opts.connection.session() as js:
        info = await bucket_info(js, opts.bucket)
        if not info.config.allow_atomic:
            raise ClientValidationError(
                f"bucket {opts.bucket!r} has no atomic batches (allow_atomic); "
                "update it with kvstore.update_bucket"
            )
        return info.state.last_seq


@dataclasses.dataclass
class KVCommit(WriterCommitMessage):
    """What one partition stored: its keys, atomic batches and revision range."""

    keys: int = 0
    batches: int = 0
    first_revision: int = 0
    last_revision: int = 0


class KVArrowWriter(DataSourceArrowWriter):
    """Writes each partition in atomic batches (one connection and event loop per task).
    ``start`` is the bucket's last revision when the job was planned."""

    def __init__(self, opts: Options, start: int = 0) -> None:
        self.opts = opts
        self.start = start

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KVCommit:
        return run_sync(lambda: _write_partition(self.opts, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log.info("natskv write committed: %s", _summary(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Log what the job stored, failed tasks included: Spark hands ``abort`` only the
        successful tasks' messages (None for a failed one), so the failed tasks' part is
        measured on the bucket (its revisions since planning) and each failed task also
        names its own count in its error."""
        _log.warning(
            "natskv write to bucket %r aborted; nothing can be rolled back, every batch is "
            "stored whole. Successful tasks stored %s. %s",
            self.opts.bucket,
            _summary(messages),
            _growth(self.opts, self.start),
        )


def _summary(messages: Sequence[WriterCommitMessage | None]) -> str:
    done = [m for m in messages if isinstance(m, KVCommit)]
    keys = sum(m.keys for m in done)
    batches = sum(m.batches for m in done)
    failed = len(messages) - len(done)
    return (
        f"{keys} keys in {batches} batches ({len(done)} of {len(messages)} tasks succeeded"
        f"{f', {failed} failed' if failed else ''})"
    )


def _growth(opts: Options, start: int) -> str:
    """What the whole job stored (failed tasks included), read from the bucket itself."""
    try:
        last = run_sync(lambda: last_seq(opts))
    except JetStreamError as exc:
        return f"What failed tasks stored could not be measured ({type(exc).__name__}: {exc})."
    if last <= start:
        return "The bucket has no revision newer than the job's start: failed tasks stored none."
    return (
        f"All tasks, failed ones included, stored at most {last - start} revisions "
        f"({start + 1}..{last}; other writers' revisions would count too)."
    )


async def _write_partition(opts: Options, batches: Iterator[pa.RecordBatch]) -> KVCommit:
    result = KVCommit()
    try:
        async with opts.connection.session() as js:
            bucket = await writable_bucket(js, opts)
            deadline = commit_deadline(opts)
            group: dict[str, tuple[bytes | None, Any]] = {}
            for record_batch in batches:
                for key, value, ttl in _rows(record_batch, opts):
                    if key in group or len(group) >= opts.batch_size:  # a key once per batch
                        await _store(bucket, group, result, deadline)
                        group = {}
                    group[key] = (value, ttl)
            if group:
                await _store(bucket, group, result, deadline)
    except Exception as exc:
        # abort() never sees a failed task's commit message: say here what stays stored.
        stored = (
            f"natskv: this task stored {result.keys} keys in {result.batches} atomic batches "
            f"(revisions {result.first_revision}..{result.last_revision}) before it failed; "
            "they stay stored"
            if result.batches
            else "natskv: this task stored nothing before it failed"
        )
        _log.error("%s: %s: %s", stored, type(exc).__name__, exc)
        exc.add_note(stored)
        raise
    return result


def _rows(batch: pa.RecordBatch, opts: Options) -> Iterator[tuple[str, bytes | None, Any]]:
    keys = batch.column(opts.key_column).to_pylist()
    values = batch.column(opts.value_column).to_pylist()
    ttls = batch.column(opts.ttl_column).to_pylist() if opts.ttl_column else [None] * len(keys)
    for key, value, ttl in zip(keys, values, ttls, strict=True):
        if not isinstance(key, str):
            raise ClientValidationError(f"keys must be strings, got {key!r}")
        yield key, value.encode() if isinstance(value, str) else value, ttl


async def _store(
    bucket: Any, group: dict[str, tuple[bytes | None, Any]], result: KVCommit, deadline: float
) -> None:
    async with bucket.batch(max_keys=len(group), deadline=deadline) as batch:
        for key, (value, ttl) in group.items():
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value, ttl=ttl)
    revisions = list(batch.revisions.values())
    result.keys += len(revisions)
    result.batches += 1
    result.first_revision = result.first_revision or min(revisions)
    result.last_revision = max(result.last_revision, max(revisions))
