"""Consistent multi-key reads: every key as of one stream sequence (``Bucket.get_many``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from jetstream import JetStreamError, StoredMessage

from ._models import Entry, Op

if TYPE_CHECKING:
    from ._bucket import Bucket

__all__ = ["MULTI_GET_CHUNK", "Snapshot", "read_snapshot"]

MULTI_GET_CHUNK = 1000
"""Keys per batched direct get; the server answers at most 1024 messages per request."""


class Snapshot(Mapping[str, Entry]):
    """Live values of the requested keys, all as of stream sequence :attr:`revision`.

    A mapping of key to :class:`Entry` for the keys that had a live value; :attr:`missing`
    lists the others (never written, deleted, purged or expired), in request order. Because a
    ``put_many`` is stored as one contiguous run of sequences, a snapshot holds all of it or
    none of it.
    """

    __slots__ = ("_entries", "missing", "revision")

    def __init__(self, entries: dict[str, Entry], missing: tuple[str, ...], revision: int) -> None:
        self._entries = entries
        self.missing = missing
        self.revision = revision

    def __getitem__(self, key: str) -> Entry:
        return self._entries[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"<Snapshot revision={self.revision} keys={list(self)} missing={list(self.missing)}>"


async def read_snapshot(bucket: Bucket, keys: Iterable[str]) -> Snapshot:
    """Read ``keys`` consistently with batched direct gets sharing one ``up_to_seq``.

    Raises:
        InvalidKeyError: a bad key (nothing is sent).
        JetStreamError: the bucket has no direct get, or a request failed.
    """
    wanted = list(dict.fromkeys(keys))  # unique, in request order
    subjects = [bucket._subject(key) for key in wanted]
    if not bucket._direct:
        raise JetStreamError(
            f"get_many needs direct get, which bucket {bucket.name!r} lacks (it was created "
            "without allow_direct); enable it with kvstore.update_bucket(js, name)"
        )
    js, stream = bucket._js, bucket.stream
    up_to: int | None = None
    if len(subjects) > MULTI_GET_CHUNK:  # several requests: pin the point in time first
        up_to = (await js.stream_info(stream)).state.last_seq
    found: dict[str, StoredMessage] = {}
    for start in range(0, len(subjects), MULTI_GET_CHUNK):
        chunk = subjects[start : start + MULTI_GET_CHUNK]
        messages, up_to = await js.get_last_messages(stream, chunk, up_to_seq=up_to)
        found.update((m.subject, m) for m in messages)
    entries: dict[str, Entry] = {}
    for key, subject in zip(wanted, subjects, strict=True):
        message = found.get(subject)
        if message is not None:
            entry = bucket._entry(message)
            if entry.op is Op.PUT:
                entries[key] = entry
    missing = tuple(key for key in wanted if key not in entries)
    return Snapshot(entries, missing, up_to or 0)
