"""The rows of a ``natskv`` read: their schema, the columns a user schema may ask for, and a
stored message turned into one."""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import (
    BinaryType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from jetstream import StoredMessage
from jetstream._options import read_columns

from .._codecs import KeyCodec
from .._encryption import EncryptionStage
from .._models import Op, op_from_headers
from .._stages import ValueContext

__all__ = ["ROW_TYPE", "SCHEMA", "projection", "row"]

ROW_TYPE = StructType(
    [
        StructField("key", StringType()),
        StructField("value", BinaryType()),
        StructField("revision", LongType()),
        StructField("created", TimestampType()),
        StructField("op", StringType()),
    ]
)
"""The rows of a ``natskv`` read, for a reader built without a session (``reader(ROW_TYPE)``)."""
SCHEMA = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in ROW_TYPE.fields)


def projection(schema: StructType) -> tuple[tuple[str, bool], ...]:
    """(field, as_text) for each requested column: a user schema may pick, reorder, and read
    ``value`` as a string (decoded as UTF-8).

    Raises:
        ColumnError: a column natskv does not have, or of a type it cannot give (a
            ``value int`` failed every task in pyarrow's conversion).
    """
    columns = read_columns(schema, _READ_TYPES, "natskv")
    return tuple((name, name == "value" and kind == "string") for name, kind in columns)


_READ_TYPES = {field.name: (field.dataType.typeName(),) for field in ROW_TYPE.fields} | {
    "value": ("binary", "string"),
    "revision": ("long", "integer", "double"),  # what Spark converts a revision to
}


def row(
    message: StoredMessage,
    prefix: str,
    projection: tuple[tuple[str, bool], ...],
    stage: EncryptionStage | None = None,
    bucket: str = "",
    codec: KeyCodec | None = None,
) -> tuple[Any, ...]:
    """One row of ``message``: its key decoded by ``codec`` (KeyDecodeError fails the task
    for a key not written through it), its value decrypted by ``stage``."""
    key = message.subject[len(prefix) :]
    op = op_from_headers(message.headers)
    value = message.data if op is Op.PUT else b""  # as Entry: tombstones have no value
    if stage is not None and op is Op.PUT and any(name == "value" for name, _ in projection):
        context = ValueContext(bucket, key, message.headers, message.seq)
        value = stage.open(value, context)  # DecryptionError fails the task
    values: dict[str, Any] = {
        "key": key if codec is None else codec.decode_key(key),
        "value": value,
        "revision": message.seq,
        "created": message.time,
        "op": op.value,
    }
    return tuple(
        values[name].decode("utf-8", "replace") if as_text else values[name]
        for name, as_text in projection
    )
