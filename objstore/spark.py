"""PySpark helpers for object stores: ``upload_objects`` (executors upload, a DataFrame of
outcomes comes back) and the ``natsobj`` format that lists a store's objects. Needs the
``spark`` extra (``pip install 'jetstore[spark]'``).

::

    from objstore.spark import upload_objects, register
    results = upload_objects(
        files_df, "artifacts", servers=url, path_col="path", allowed_root="/data/in"
    )
    register(spark)
    spark.read.format("natsobj").option("servers", url).load("artifacts")

``natsobj`` options (names are case-insensitive; an unknown option is refused with the list of
known ones): the connection options of ``natskv`` (``servers``, ``connectTimeout``,
``connectAttempts``, credentials), ``store`` (or the load path), ``limit`` (at most this many
rows, 0 = all) and ``includeDeleted`` (false: also list deleted objects).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

try:
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader
    from pyspark.sql.types import StructType
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra check
    raise ImportError(
        "objstore.spark needs PySpark >= 4.2, pyarrow and pandas: pip install 'jetstore[spark]'"
    ) from exc

from jetstream import ClientValidationError, Keyring
from jetstream._errors import ColumnError, check_count
from jetstream._options import (
    CONNECTION_OPTIONS,
    ConnectionOptions,
    activate_spark_session,
    bool_option,
    check_options,
    int_option,
    named_option,
    read_columns,
    run_sync,
)
from jetstream._protocol.bucket_config import validate_bucket_name

from ._errors import DuplicateObjectNameError
from ._manage import open_store
from ._many import UploadItem, upload_many
from ._models import DEFAULT_CHUNK_SIZE
from ._paths import check_root
from ._store import check_chunk_size, store_info

__all__ = ["ObjectsDataSource", "register", "upload_objects"]

RESULT_SCHEMA = "name string, size long, digest string, chunks int, error string"
LIST_SCHEMA = (
    "name string, size long, chunks int, digest string, modified timestamp, description string"
)


def register(spark: Any) -> None:
    """Register the ``natsobj`` format with a SparkSession (idempotent), and make ``spark`` the
    calling thread's active session: call it in each thread that uses the format (see
    :func:`kvstore.spark.register`)."""
    spark.dataSource.register(ObjectsDataSource)
    activate_spark_session(spark)


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


_KNOWN = (*CONNECTION_OPTIONS, "store", "path", "limit", "includeDeleted")


class ObjectsDataSource(DataSource):
    """The ``natsobj`` format: one row per object of a store (options: see the module)."""

    @classmethod
    def name(cls) -> str:
        return "natsobj"

    def schema(self) -> str:
        return LIST_SCHEMA

    def reader(self, schema: StructType) -> _ListReader:
        """Validate the options and check the store exists, at planning time.

        Raises:
            ClientValidationError: a bad or unknown option, or no store named.
            StoreNotFoundError: no such store (names it).
            ConnectionFailedError: no server reachable.
        """
        check_options(self.options, _KNOWN, "natsobj")
        store = named_option(self.options, "store")
        validate_bucket_name(store)
        columns = tuple(name for name, _ in read_columns(schema, _LIST_TYPES, "natsobj"))
        reader = _ListReader(
            ConnectionOptions.from_strings(self.options), store, self.options, columns
        )
        run_sync(reader.check)
        return reader


_LIST_TYPES = {
    name: ({"int": "integer"}.get(kind, kind),)  # DDL names as Spark's typeName() spells them
    for name, kind in (column.split() for column in LIST_SCHEMA.split(","))
}


class _ListReader(DataSourceReader):
    def __init__(
        self,
        connection: ConnectionOptions,
        store: str,
        options: Mapping[str, str],
        columns: tuple[str, ...],
    ) -> None:
        self.connection = connection
        self.store = store
        self.columns = columns
        self.limit = int_option(options, "limit", 0, low=0)
        self.include_deleted = bool_option(options, "includeDeleted", False)

    async def check(self) -> None:
        async with self.connection.session() as js:
            await store_info(js, self.store)

    def read(self, partition: Any) -> Iterator[tuple[Any, ...]]:
        yield from run_sync(self._list)

    async def _list(self) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        async with self.connection.session() as js:
            store = await open_store(js, self.store)
            async for i in store.list(include_deleted=self.include_deleted):
                rows.append(tuple(getattr(i, column) for column in self.columns))
                if len(rows) == self.limit:
                    break
        return rows
