"""``writeStream.format("natsobj")``: rows of ``name`` and ``data`` (binary) or ``path`` (a
file read on the executor), each stored once as a whole object per name and micro-batch,
whatever fails and however late the replay: each object's meta record carries the tag of the
task that stored it (``objstore._once``), and a replayed task finds its tag and stores nothing
again (``_sink_store``)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructField, StructType

from jetstream import ClientValidationError, Keyring
from jetstream._errors import ColumnError
from jetstream._options import (
    CONNECTION_OPTIONS,
    ConnectionOptions,
    check_options,
    int_option,
    named_option,
    run_sync,
    str_option,
)
from jetstream._protocol.bucket_config import validate_bucket_name
from jetstream._spark_task import TaskId

from .._core import open_core, store_info
from .._models import DEFAULT_CHUNK_SIZE
from .._once import WriteTag
from .._paths import check_root
from ._sink_store import Limits, Report, Row, store_objects

__all__ = ["ObjectSinkCommit", "ObjectStreamWriter", "SinkOptions", "sink_options"]

_log = logging.getLogger("objstore.spark")

_KNOWN = (
    *CONNECTION_OPTIONS,
    "store",
    "path",
    "nameColumn",
    "dataColumn",
    "pathColumn",
    "chunkSize",
    "concurrency",
    "allowedRoot",
    "keyFile",
    "onBadRow",
    "checkpointLocation",  # Spark's own (it hands the sink every writeStream option)
)


@dataclasses.dataclass(frozen=True)
class SinkOptions:
    """The natsobj stream writer's options, checked on the driver (picklable: no keys, the
    key file is read where each task runs)."""

    connection: ConnectionOptions
    store: str
    name_column: str
    data_column: str | None
    path_column: str | None
    limits: Limits
    key_file: str | None = None


def sink_options(options: Mapping[str, str], schema: StructType) -> SinkOptions:
    """Parse the options and resolve the columns against the query's schema.

    Raises:
        ClientValidationError: an unknown option or a bad value (the message names it).
        InvalidKeyringError: a key file that cannot be read or is not one.
        ColumnError: no name column, neither a data nor a path column, or a wrong type.
    """
    check_options(options, _KNOWN, "natsobj streamWrite")
    store = named_option(options, "store")
    validate_bucket_name(store)
    key_file = str_option(options, "keyFile")
    if key_file is not None:
        Keyring.from_file(key_file)  # a bad key file fails at planning, not in the tasks
    root = str_option(options, "allowedRoot")
    on_bad_row = (str_option(options, "onBadRow", "fail") or "fail").lower()
    if on_bad_row not in ("fail", "skip"):
        raise ClientValidationError(f"option 'onBadRow' must be one of fail, skip: {on_bad_row!r}")
    fields = {field.name.lower(): field for field in schema.fields}
    data = _column(fields, options, "dataColumn", "data", "binary")
    path = _column(fields, options, "pathColumn", "path", "string")
    name = _column(fields, options, "nameColumn", "name", "string")
    if name is None or (data is None and path is None):
        missing = "name" if name is None else "data (binary) or path (string)"
        raise ColumnError(
            f"natsobj: the query has no {missing} column (nameColumn, dataColumn, pathColumn): "
            f"{schema.fieldNames()}"
        )
    return SinkOptions(
        connection=ConnectionOptions.from_strings(options),
        store=store,
        name_column=name,
        data_column=data,
        path_column=path,
        limits=Limits(
            chunk_size=int_option(options, "chunkSize", DEFAULT_CHUNK_SIZE, high=8 * 1024 * 1024),
            concurrency=int_option(options, "concurrency", 4, high=64),
            root=None if root is None else check_root(root),
            skip_bad=on_bad_row == "skip",
        ),
        key_file=key_file,
    )


def _column(
    fields: Mapping[str, StructField],
    options: Mapping[str, str],
    option: str,
    default: str,
    kind: str,
) -> str | None:
    """The DataFrame's spelling of the column ``option`` names (case-insensitive, as Spark);
    None when the default column is absent.

    Raises:
        ColumnError: a column named by the option is absent, or the column is of another type.
    """
    given = str_option(options, option)
    field = fields.get((given or default).lower())
    if field is None:
        if given is not None:
            raise ColumnError(f"natsobj: column {given!r} ({option}) is not in the query")
        return None
    data_type = field.dataType
    if data_type.typeName() != kind:
        raise ColumnError(
            f"natsobj: column {field.name!r} ({option}) has type {data_type.simpleString()}; "
            f"it must be {kind}"
        )
    return str(field.name)


async def check_store(opts: SinkOptions) -> None:
    """Raises StoreNotFoundError (naming it) or ConnectionFailedError, before any task runs."""
    async with opts.connection.session() as js:
        await store_info(js, opts.store)


@dataclasses.dataclass
class ObjectSinkCommit(WriterCommitMessage):
    """What one task did."""

    task: TaskId
    report: Report


class ObjectStreamWriter(DataSourceStreamArrowWriter):
    """Stores each micro-batch's objects once (see the module docstring)."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ObjectSinkCommit:
        """Store this task's objects.

        Raises:
            As :meth:`store`.
        """
        return self.store(TaskId.current("natsobj"), _rows(iterator, self.opts))

    def store(self, task: TaskId, rows: list[Row]) -> ObjectSinkCommit:
        """Store ``rows`` as task ``task`` (what :meth:`write` does once it read them).

        Raises:
            InvalidKeyringError: the key file cannot be read where the task runs.
            As ``store_objects``: a bad row (before anything is stored), failed uploads
                (the error's note says what the task had stored).
        """
        report = Report(rows=len(rows))
        if not rows:  # nothing to store, nothing to ask the server
            return ObjectSinkCommit(task, report)
        try:
            report = run_sync(lambda: self._store(task, rows))
        except Exception as exc:
            notes = getattr(exc, "__notes__", [])
            if not any(note.startswith("natsobj:") for note in notes):
                exc.add_note(f"natsobj: this task stored no object of micro-batch {task.batch}")
            _log.error("%s: %s: %s", exc.__notes__[-1], type(exc).__name__, exc)
            raise
        return ObjectSinkCommit(task, report)

    async def _store(self, task: TaskId, rows: list[Row]) -> Report:
        opts = self.opts
        keyring = None if opts.key_file is None else Keyring.from_file(opts.key_file)
        tag = WriteTag(f"{task.query}/{task.batch}", str(task.partition))
        async with opts.connection.session() as js:
            store = await open_core(js, opts.store, encryption=keyring)
            return await store_objects(store, rows, tag, opts.limits, task.batch)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Log what the micro-batch stored."""
        done = [m.report for m in messages if isinstance(m, ObjectSinkCommit)]
        _log.info("natsobj micro-batch %d committed: %s", batchId, _describe(done))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Log what the successful tasks stored (each failed task says so in its error); a
        replay of the micro-batch stores the rest, nothing twice."""
        done = [m.report for m in messages if isinstance(m, ObjectSinkCommit)]
        _log.warning(
            "natsobj micro-batch %d aborted (%d of %d tasks failed); the successful tasks: "
            "%s. A replay of the micro-batch stores the rest, no object twice.",
            batchId,
            len(messages) - len(done),
            len(messages),
            _describe(done),
        )


def _describe(reports: Iterable[Report]) -> str:
    reports = list(reports)
    stored = sum(r.stored for r in reports)
    text = f"{stored} objects stored ({sum(r.bytes for r in reports)} bytes)"
    found = sum(r.found for r in reports)
    if found:
        text += f", {found} found stored already (a replay: not stored again)"
    bad = sum(r.bad for r in reports)
    if bad:
        text += f", {bad} bad rows left out"
    return text


def _rows(batches: Iterator[pa.RecordBatch], opts: SinkOptions) -> list[Row]:
    """The task's rows, in input order: name, data, path."""
    rows: list[Row] = []
    for batch in batches:
        names = batch.column(opts.name_column).to_pylist()
        nothing = [None] * len(names)
        data = batch.column(opts.data_column).to_pylist() if opts.data_column else nothing
        paths = batch.column(opts.path_column).to_pylist() if opts.path_column else nothing
        rows.extend(zip(names, data, paths, strict=True))
    return rows
