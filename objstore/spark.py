"""PySpark helpers for object stores: ``upload_objects`` (executors upload, a DataFrame of
outcomes comes back) and the ``natsobj`` format that lists a store's objects. Needs the
``spark`` extra (``pip install 'jetstore[spark]'``).

::

    from objstore.spark import upload_objects, register
    results = upload_objects(files_df, "artifacts", servers=url, path_col="path")
    register(spark)
    spark.read.format("natsobj").option("servers", url).load("artifacts")
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

from jetstream import (
    ClientValidationError,
    ConnectionOptions,
    int_option,
    run_sync,
    str_option,
    validate_bucket_name,
)

from ._manage import open_store
from ._many import UploadItem, upload_many
from ._models import DEFAULT_CHUNK_SIZE

__all__ = ["ObjectsDataSource", "register", "upload_objects"]

RESULT_SCHEMA = "name string, size long, digest string, chunks int, error string"
LIST_SCHEMA = (
    "name string, size long, chunks int, digest string, modified timestamp, description string"
)


def register(spark: Any) -> None:
    """Register the ``natsobj`` format with a SparkSession (idempotent)."""
    spark.dataSource.register(ObjectsDataSource)


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
    **connection: str,
) -> Any:
    """Upload one object per row, from a column of file paths (streamed from disk on the
    executors) or of binary content, over fast-ingest batches. Returns a DataFrame of
    ``name, size, digest, chunks, error``: a failed object has ``error`` set and does not fail
    the others or the job.

    Spark DataFrames are lazy and would upload again on every action; with ``eager`` (the
    default) the result is persisted and computed once before it is returned.

    Raises:
        ClientValidationError: not exactly one of ``path_col``/``data_col``, a missing column,
            a bad store name, ``concurrency`` below 1, or no server.
    """
    if (path_col is None) == (data_col is None):
        raise ClientValidationError("give exactly one of path_col or data_col")
    if concurrency < 1:
        raise ClientValidationError(f"concurrency must be at least 1: {concurrency}")
    validate_bucket_name(store)
    for column in (name_col, path_col or data_col):
        if column not in df.columns:
            raise ClientValidationError(f"column {column!r} is not in the DataFrame: {df.columns}")
    options = {**connection, **({"servers": servers} if servers else {})}
    task = _UploadTask(
        ConnectionOptions.from_strings(options),
        store,
        name_col,
        path_col,
        data_col,
        chunk_size,
        concurrency,
    )
    result = df.select(*{name_col, path_col or data_col}).mapInArrow(task, RESULT_SCHEMA)
    if eager:
        result = result.persist()
        result.count()
    return result


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

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        items = [item for batch in batches for item in self._items(batch)]
        outcomes = run_sync(
            lambda: upload_many(
                self.connection,
                self.store,
                items,
                chunk_size=self.chunk_size,
                concurrency=self.concurrency,
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


class ObjectsDataSource(DataSource):
    """The ``natsobj`` format: one row per object of a store (options: ``servers``...,
    ``store`` or the load path, ``includeDeleted``)."""

    @classmethod
    def name(cls) -> str:
        return "natsobj"

    def schema(self) -> str:
        return LIST_SCHEMA

    def reader(self, schema: StructType) -> _ListReader:
        store = str_option(self.options, "store") or str_option(self.options, "path")
        if not store:
            raise ClientValidationError("option 'store' (or a load path) is required")
        validate_bucket_name(store)
        return _ListReader(ConnectionOptions.from_strings(self.options), store, self.options)


class _ListReader(DataSourceReader):
    def __init__(
        self, connection: ConnectionOptions, store: str, options: Mapping[str, str]
    ) -> None:
        self.connection = connection
        self.store = store
        self.limit = int_option(options, "limit", 0, low=0)

    def read(self, partition: Any) -> Iterator[tuple[Any, ...]]:
        yield from run_sync(self._list)

    async def _list(self) -> list[tuple[Any, ...]]:
        async with await self.connection.connect() as js:
            store = await open_store(js, self.store)
            return [
                (i.name, i.size, i.chunks, i.digest, i.modified, i.description)
                async for i in store.list()
            ]
