"""``upload_objects``: executors upload one object per row of a DataFrame (from a path or
binary column) and a DataFrame of outcomes comes back."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from jetstream import ClientValidationError, Keyring
from jetstream._errors import ColumnError, check_count
from jetstream._options import (
    CONNECTION_OPTIONS,
    ConnectionOptions,
    check_options,
    run_sync,
)
from jetstream._protocol.bucket_config import validate_bucket_name
from jetstream._spark_python import check_worker_python

from .._checks import check_chunk_size
from .._errors import DuplicateObjectNameError
from .._many import UploadItem, upload_many
from .._models import DEFAULT_CHUNK_SIZE
from .._paths import check_root

__all__ = ["RESULT_SCHEMA", "upload_objects"]

RESULT_SCHEMA = "name string, size long, digest string, chunks int, error string"


def upload_objects(
    df: Any,
    store: str,
    *,
    servers: str | None = None,
    name_col: str = "name",
    path_col: str | None = None,
    data_col: str | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    concurrency: int = 4,
    eager: bool = True,
    allowed_root: str | None = None,
    key_file: str | None = None,
    **connection: str,
) -> Any:
    """Upload one object per row, from a column of file paths (streamed from disk on the
    executors) or of binary content, over fast-ingest batches. Returns a DataFrame of
    ``name, size, digest, chunks, error``: a failed object has ``error`` set and does not fail
    the others or the job. A store that does not exist is such a per-object error too
    (``StoreNotFoundError`` on every row): create it first with ``objstore.create_store``.

    Names must be unique within the job: two rows for one name would race (the stored object
    would be an arbitrary one of them), so repeated names are refused before anything is
    uploaded (this costs one extra pass over the name column).

    Spark DataFrames are lazy and would upload again on every action; with ``eager`` (the
    default) the result is persisted and computed once before it is returned.

    **Paths are read with the executors' rights:** without ``allowed_root`` the path column
    can name any file an executor can read (``/etc/passwd``, another job's secrets), so a
    DataFrame built from untrusted input can exfiltrate them into the store. Give
    ``allowed_root`` (an absolute directory, e.g. ``"/data/in"``): a row whose path resolves,
    after symlinks, outside it (or to anything but a regular file) fails with
    ``PathNotAllowedError`` in its ``error`` column and nothing of it is read or uploaded.
    A file that changes while it is read fails its row with ``SourceChangedError`` and
    nothing of it is stored; one that is missing fails it with ``SourceNotFoundError``.

    With ``key_file`` (a key file, as ``natskv``'s ``keyFile``: each executor reads it where it
    runs, so keys never travel with the job) every object is encrypted chunk by chunk with
    the file's primary key (see docs/CODECS.md, "Encrypted objects").

    ``connection`` takes the ``natskv`` connection options (``connectTimeout``,
    ``connect_timeout``, ``connectAttempts``, ``user``, ``creds``, ...) as strings.

    Raises:
        ClientValidationError: not exactly one of ``path_col``/``data_col``, a bad store name,
            ``concurrency`` below 1 or ``chunk_size`` not 1..8 MiB (either not an int:
            WrongTypeError, one too), an unknown connection option, no server, or an
            ``allowed_root`` that is not an absolute path (or given with ``data_col``).
        InvalidKeyringError: ``key_file`` cannot be read or is not a key file.
        ColumnError: a missing column, or one of the wrong type (names: string, paths:
            string, data: binary).
        DuplicateObjectNameError: a name appears on more than one row (nothing is uploaded).
        SparkWorkerPythonError: a local session whose Python workers cannot import objstore.
    """
    if (path_col is None) == (data_col is None):
        raise ClientValidationError("give exactly one of path_col or data_col")
    concurrency = check_count(concurrency, "concurrency", 1)
    chunk_size = check_chunk_size(chunk_size)  # not in every task's result: before the job
    validate_bucket_name(store)
    if allowed_root is not None:
        if path_col is None:
            raise ClientValidationError("allowed_root applies to path_col uploads only")
        allowed_root = check_root(allowed_root)
    check_options(connection, CONNECTION_OPTIONS, "upload_objects")
    check_worker_python(df.sparkSession, "objstore")
    if key_file is not None:
        Keyring.from_file(key_file)  # a bad key file fails here, not in every task
    name_col = _column(df, name_col, "string")
    if path_col is not None:
        path_col = _column(df, path_col, "string")
    if data_col is not None:
        data_col = _column(df, data_col, "binary")
    _refuse_duplicates(df, name_col)
    options = {**connection, **({"servers": servers} if servers else {})}
    task = _UploadTask(
        ConnectionOptions.from_strings(options),
        store,
        name_col,
        path_col,
        data_col,
        chunk_size,
        concurrency,
        allowed_root,
        key_file,
    )
    result = df.select(*{name_col, path_col or data_col}).mapInArrow(task, RESULT_SCHEMA)
    if eager:
        result = result.persist()
        result.count()
    return result


def _column(df: Any, column: str, type_name: str) -> str:
    """The DataFrame's own spelling of ``column`` (matched case-insensitively, as Spark does),
    checked to be of ``type_name``."""
    for field in df.schema.fields:
        if field.name.lower() == column.lower():
            if field.dataType.typeName() != type_name:
                raise ColumnError(
                    f"upload_objects: column {field.name!r} has type "
                    f"{field.dataType.simpleString()}; it must be {type_name}"
                )
            return str(field.name)
    raise ColumnError(f"upload_objects: column {column!r} is not in the DataFrame: {df.columns}")


def _refuse_duplicates(df: Any, name_col: str, shown: int = 20) -> None:
    from pyspark.sql import functions

    repeated = (
        df.groupBy(name_col)
        .agg(functions.count(functions.lit(1)).alias("rows"))
        .where("rows > 1")
        .limit(shown)
        .collect()
    )
    if repeated:
        names = tuple(str(row[0]) for row in repeated)
        more = " (and maybe more)" if len(names) == shown else ""
        raise DuplicateObjectNameError(
            f"upload_objects: object names repeated on several rows{more}: "
            f"{', '.join(map(repr, names))}; each name must appear once per job "
            "(nothing was uploaded)",
            names,
        )


@dataclasses.dataclass(frozen=True)
class _UploadTask:
    """The per-partition function (picklable: plain data only, no connection)."""

    connection: ConnectionOptions
    store: str
    name_col: str
    path_col: str | None
    data_col: str | None
    chunk_size: int
    concurrency: int
    allowed_root: str | None = None
    key_file: str | None = None
    """Read where the task runs: the keys are never pickled into the job."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        items = [item for batch in batches for item in self._items(batch)]
        outcomes = run_sync(
            lambda: upload_many(
                self.connection,
                self.store,
                items,
                chunk_size=self.chunk_size,
                concurrency=self.concurrency,
                allowed_root=self.allowed_root,
                encryption=None if self.key_file is None else Keyring.from_file(self.key_file),
            )
        )
        yield pa.RecordBatch.from_pylist(
            [dataclasses.asdict(outcome) for outcome in outcomes],
            schema=pa.schema(
                [
                    ("name", pa.string()),
                    ("size", pa.int64()),
                    ("digest", pa.string()),
                    ("chunks", pa.int32()),
                    ("error", pa.string()),
                ]
            ),
        )

    def _items(self, batch: pa.RecordBatch) -> Iterator[UploadItem]:
        names = batch.column(self.name_col).to_pylist()
        source_col = self.path_col or self.data_col
        assert source_col is not None
        column = batch.column(source_col).to_pylist()
        for name, value in zip(names, column, strict=True):
            if self.path_col:
                yield UploadItem(name=name, path=value)
            else:
                yield UploadItem(name=name, data=value)
