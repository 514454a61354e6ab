"""The progress a streaming write keeps in the bucket it writes: which rows of which
micro-batch are stored. It is written in the same atomic batches as the rows, on the
condition that nobody wrote it since it was read, so a replayed micro-batch (the same id,
the same rows) stores nothing twice, however long after the first attempt it comes.

Keys, under the reserved prefix ``_jetstore.sink.``: ``<queryId>.<partition>`` for a task's
rows (``atomicity=task``), ``<queryId>`` for a whole micro-batch (``atomicity=microBatch``).
Their value is JSON: the micro-batch id, how many of its input rows (in input order) are
stored, and a digest of those rows, so a replay whose rows differ fails instead of storing
some of them twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import msgspec

from jetstream import JetStreamError

from .._bucket import Bucket
from .._errors import KeyNotFoundError

__all__ = [
    "PATH_PREFIX",
    "PREFIX",
    "RESERVED",
    "Progress",
    "RowDigest",
    "SinkProgressError",
    "query_key",
    "read_progress",
    "task_key",
]

PREFIX = "_jetstore.sink."
"""Keys the stream writer keeps its progress under; rows may not write them."""
PATH_PREFIX = "_jetstore/sink/"
"""The same, for a bucket written through ``keyCodec=path`` (which refuses dots in keys)."""
RESERVED = (PREFIX, PATH_PREFIX)

RawRow = tuple[Any, Any, Any]
"""One input row as the DataFrame holds it: key, value, ttl."""


class SinkProgressError(JetStreamError):
    """The progress a streaming write keeps in its bucket does not fit the micro-batch being
    written: a replay whose rows differ from the rows stored the first time (the query's
    input or transformation is not deterministic), or a progress key another writer changed.
    Nothing more of the task is stored."""


def task_key(query_id: str, partition: int, path_keys: bool = False) -> str:
    """The progress key of one task's rows (``atomicity=task``); ``path_keys``: as a path
    (through ``keyCodec=path`` it is stored as the dotted key)."""
    if path_keys:
        return f"{PATH_PREFIX}{query_id}/{partition}"
    return f"{PREFIX}{query_id}.{partition}"


def query_key(query_id: str, path_keys: bool = False) -> str:
    """The progress key of a query storing whole micro-batches (``atomicity=microBatch``)."""
    return f"{PATH_PREFIX if path_keys else PREFIX}{query_id}"


class _Stored(msgspec.Struct, frozen=True):
    batch: int
    rows: int
    digest: str


class RowDigest:
    """A running digest of input rows: the same rows in the same order give the same digest,
    however they were cut into atomic batches (each row is encoded on its own)."""

    _encode = msgspec.msgpack.Encoder().encode

    def __init__(self, rows: Sequence[RawRow] = ()) -> None:
        self._hash = hashlib.blake2b(digest_size=16)
        self.update(rows)

    def update(self, rows: Sequence[RawRow]) -> None:
        self._hash.update(b"".join(map(self._encode, rows)))

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


class Progress(msgspec.Struct, frozen=True):
    """What the key says is stored: ``rows`` input rows of micro-batch ``batch`` (-1: none
    yet), at the key's ``revision`` (0: no live value)."""

    key: str
    revision: int = 0
    batch: int = -1
    rows: int = 0
    digest: str = ""

    def advanced(self, batch: int, rows: int, digest: str) -> bytes:
        """The key's next value: ``rows`` rows of ``batch`` stored, ``digest`` theirs."""
        return msgspec.json.encode(_Stored(batch, rows, digest))

    def stored_rows(self, batch: int, rows: Sequence[RawRow]) -> int:
        """How many of ``rows`` (micro-batch ``batch``'s input, in order) are stored already.

        Raises:
            SinkProgressError: the stored rows of this micro-batch are not the first rows of
                ``rows`` (their digest differs, or there are more of them).
        """
        if self.batch < batch:
            return 0
        if self.batch > batch:  # a later micro-batch ran, so Spark committed this one whole
            return len(rows)
        if self.rows > len(rows) or RowDigest(rows[: self.rows]).hexdigest() != self.digest:
            raise SinkProgressError(
                f"natskv: {self.rows} rows of micro-batch {batch} are stored under {self.key!r}"
                f", but the replay has {len(rows)} rows whose first {self.rows} differ: the "
                "query's input or transformation is not deterministic (a replay must give each "
                "task the same rows in the same order; e.g. sortWithinPartitions after a "
                "shuffle). Nothing more was stored."
            )
        return self.rows


async def read_progress(bucket: Bucket, key: str, revision: int | None = None) -> Progress:
    """The progress stored under ``key`` (at ``revision`` when known: a replica that trails
    the leader is then overruled).

    Raises:
        SinkProgressError: the key holds something this writer never stores.
        BucketNotFoundError: the bucket was deleted.
    """
    try:
        entry = await bucket.get(key, revision=revision or None)
    except KeyNotFoundError:
        return Progress(key)
    try:
        stored = msgspec.json.decode(entry.value, type=_Stored)
    except msgspec.DecodeError:
        raise SinkProgressError(
            f"natskv: key {key!r} (revision {entry.revision}) is not a streaming write's "
            f"progress; keys under {PREFIX!r} are reserved for it"
        ) from None
    return Progress(key, entry.revision, stored.batch, stored.rows, stored.digest)
