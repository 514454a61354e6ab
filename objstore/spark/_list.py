"""The ``natsobj`` format: one row per object of a store."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StructType

from jetstream import ClientValidationError
from jetstream._options import (
    CONNECTION_OPTIONS,
    ConnectionOptions,
    bool_option,
    check_options,
    int_option,
    named_option,
    read_columns,
    run_sync,
)
from jetstream._protocol.bucket_config import validate_bucket_name

from .._core import store_info
from .._manage import open_store
from ._sink import ObjectStreamWriter, check_store, sink_options

__all__ = ["LIST_SCHEMA", "ObjectsDataSource"]

LIST_SCHEMA = (
    "name string, size long, chunks int, digest string, modified timestamp, description string"
)


_KNOWN = (*CONNECTION_OPTIONS, "store", "path", "limit", "includeDeleted")


class ObjectsDataSource(DataSource):
    """The ``natsobj`` format: one row per object of a store (options: see the module)."""

    @classmethod
    def name(cls) -> str:
        return "natsobj"

    def schema(self) -> str:
        return LIST_SCHEMA

    def streamWriter(self, schema: StructType, overwrite: bool) -> ObjectStreamWriter:
        """Validate options, columns and the store at planning time.

        Raises:
            ClientValidationError: ``complete`` output mode, a bad or unknown option.
            InvalidKeyringError: a ``keyFile`` that cannot be read or is not a key file.
            ColumnError: no name column, neither a data nor a path column, or a wrong type.
            StoreNotFoundError: no such store (names it).
            ConnectionFailedError: no server reachable.
        """
        if overwrite:
            raise ClientValidationError(
                "natsobj streams take outputMode('append') or ('update'); 'complete' would "
                "need the store emptied first"
            )
        opts = sink_options(self.options, schema)
        run_sync(lambda: check_store(opts))  # fail at planning, before any task runs
        return ObjectStreamWriter(opts)

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


_ATTRIBUTES = {"modified": "mtime"}
"""ObjectInfo's attribute for a column of another name."""

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
                rows.append(tuple(getattr(i, _ATTRIBUTES.get(c, c)) for c in self.columns))
                if len(rows) == self.limit:
                    break
        return rows
