"""Consistent multi-key reads: every key as of one stream sequence (``Bucket.get_many``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Iterable, Iterator, Mapping
from typing import NamedTuple

from jetstream import JetStream, JetStreamError, MessageNotFoundError, PullMessage, StoredMessage
from jetstream import headers as hdr
from jetstream._consume.scan import scan_stream

from ._core import BucketCore
from ._keys import checked_keys
from ._models import Entry, Op

__all__ = [
    "MULTI_GET_CHUNK",
    "Snapshot",
    "Witness",
    "last_messages_along",
    "newest_message",
    "pinned_last_messages",
    "read_snapshot",
]

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


async def read_snapshot(bucket: BucketCore, keys: Iterable[str]) -> Snapshot:
    """Read ``keys`` as of one stream sequence.

    Up to 1000 keys are one batched direct get, answered by one replica as of its own last
    sequence. More share one ``up_to_seq``, the stream's newest message on the leader, and each
    request must also return that message (see :func:`pinned_last_messages`). On a bucket with
    history 1 a key rewritten after the pin has no revision left at it, and the server leaves
    it out as if it never existed; so every key reported missing is asked for again without a
    pin, and if one has a message now, the whole read is repeated at a newer point. After a few
    attempts under heavy writes, a consumer snapshot is read instead.

    Raises:
        InvalidKeyError: a bad key (nothing is sent).
        JetStreamError: the bucket has no direct get, or a request failed.
    """
    wanted = list(dict.fromkeys(checked_keys(keys)))  # unique, in request order
    subjects = [bucket.subject(key) for key in wanted]
    if not bucket.direct:
        raise JetStreamError(
            f"get_many needs direct get, which bucket {bucket.name!r} lacks (it was created "
            "without allow_direct); enable it with kvstore.update_bucket(js, name)"
        )
    own = bucket.own_writes
    floor = max((own.revision(s) for s in subjects), default=0)  # its own writes of them
    for _ in range(PINNED_ATTEMPTS):
        answer = await _read_pinned(bucket, subjects)
        if answer is None:
            continue  # a replica behind the pin answered part of it: ask again
        found, pin = answer
        if pin is not None and any(message.seq > pin for message in found.values()):
            continue  # a message past the point the answer claims: not one point in time
        if pin is not None and pin < floor:
            continue  # a replica that trails this handle's own writes answered: ask again
        absent = [subject for subject in subjects if subject not in found]
        if not absent or not await _any_stored(bucket, absent, found, pin):
            return _snapshot(bucket, wanted, subjects, found, pin)
    for _ in range(PINNED_ATTEMPTS):
        found, pin, at_boundary = await _read_by_consumer(bucket, subjects)
        if at_boundary:
            return _snapshot(bucket, wanted, subjects, found, pin)
    raise JetStreamError(
        f"get_many of {len(wanted)} keys from bucket {bucket.name!r}: no consistent point "
        f"found in {2 * PINNED_ATTEMPTS} reads under concurrent writes; nothing is returned "
        "rather than part of a record (retry, or read fewer than 1000 keys)"
    )


PINNED_ATTEMPTS = 3
"""Pinned reads before falling back to a consumer snapshot (each retry is at a newer point)."""

FILTERED_SCAN = 256  # more filter subjects slow the server down: scan the bucket instead

_PARALLEL_GETS = 8  # batched direct gets in flight at once after the first


def subject_chunks(subjects: list[str], max_payload: int, reserve: int = 0) -> list[list[str]]:
    """Split ``subjects`` into batched-get requests: at most ``MULTI_GET_CHUNK`` subjects, and
    a JSON body within the server's max payload (long keys) with ``reserve`` bytes to spare."""
    room = max_payload - 64 - reserve  # {"multi_last":[...],"up_to_seq":N}
    chunks: list[list[str]] = []
    chunk: list[str] = []
    size = 0
    for subject in subjects:
        cost = _subject_cost(subject)  # (keys need no JSON escapes)
        if chunk and (len(chunk) >= MULTI_GET_CHUNK or size + cost > room):
            chunks.append(chunk)
            chunk, size = [], 0
        chunk.append(subject)
        size += cost
    if chunk:
        chunks.append(chunk)
    return chunks


async def _read_pinned(
    bucket: BucketCore, subjects: list[str]
) -> tuple[dict[str, StoredMessage], int | None] | None:
    """Every subject as of one sequence, and that sequence (the pin); None when a replica
    behind the pin answered part of it.

    One request when the subjects fit: one replica answers it as of its own last sequence
    (its reply says which), consistent if perhaps not the newest. Otherwise every request is
    pinned to the leader's newest message, which each answer must return too."""
    js, stream = bucket.js, bucket.stream
    found: dict[str, StoredMessage] = {}
    if not subjects:
        return found, None
    if len(subject_chunks(subjects, js.nc.max_payload)) == 1:
        messages, pin = await js.get_last_messages(stream, subjects)
        found.update((m.subject, m) for m in messages)
        return found, pin
    witness = await newest_message(js, stream, f"{bucket.prefix}>")
    if witness is None:
        return found, 0  # an empty bucket: every key is missing
    if not witness.literal:
        return None  # nothing to pin with until the next write: in the end, a consumer reads
    answer = await pinned_last_messages(js, stream, subjects, witness, _PARALLEL_GETS)
    if answer is None:
        return None
    found.update((m.subject, m) for m in answer)
    return found, witness.seq


class Witness(NamedTuple):
    """A message that proves a replica has applied the sequence ``seq``: the one stored there."""

    subject: str
    seq: int

    @property
    def literal(self) -> bool:
        """Whether the subject can be asked for by name: a peer can store ``a.>`` literally,
        which a request reads as a wildcard (such a message witnesses nothing)."""
        return not any(token in ("*", ">") for token in self.subject.split("."))


async def newest_message(js: JetStream, stream: str, filter_subject: str) -> Witness | None:
    """The leader's newest message on ``filter_subject``, as a witness of its sequence (check
    :attr:`Witness.literal` before asking for it); None when there is none.

    Raises:
        JetStreamError: the request failed.
    """
    try:
        message = await js.get_last_message(stream, filter_subject, direct=False)
    except MessageNotFoundError:
        return None
    return Witness(message.subject, message.seq)


async def pinned_last_messages(
    js: JetStream, stream: str, subjects: list[str], witness: Witness, parallel: int
) -> list[StoredMessage] | None:
    """Each subject's last message at or below ``witness.seq`` (batched direct gets,
    ``parallel`` in flight); None when one answer lacks the witness at its sequence: a replica
    behind it answered, or the witness message is gone.

    Any replica (or a mirror with ``mirror_direct``) may answer each request, and one behind
    the pin answers as of its own last sequence without saying so: half of a ``put_many`` could
    come out old. So each request also asks for the witness's subject, which only a replica
    that has applied the pin returns with the pin's sequence.

    Raises:
        JetStreamError: a request failed.
    """
    found: list[StoredMessage] = []
    answers = last_messages_along(js, stream, subjects, witness.subject, witness.seq, parallel)
    async with contextlib.aclosing(answers) as chunks:
        async for chunk, messages, _ in chunks:
            if not _shows(messages, witness):
                return None
            found.extend(m for m in messages if m.subject != witness.subject or m.subject in chunk)
    return found


async def last_messages_along(
    js: JetStream,
    stream: str,
    subjects: list[str],
    along: str,
    up_to_seq: int | None,
    parallel: int,
) -> AsyncGenerator[tuple[list[str], list[StoredMessage], int | None], None]:
    """The batched direct gets of ``subjects`` (``parallel`` in flight), each asking for
    ``along`` too, as of ``up_to_seq`` (None: as of the answering replica's last sequence):
    per request its subjects, the messages, and the sequence the answer is consistent as of.

    Raises:
        JetStreamError: a request failed.
    """
    chunks = subject_chunks(subjects, js.nc.max_payload, reserve=_subject_cost(along))
    for start in range(0, len(chunks), parallel):
        batch = chunks[start : start + parallel]
        answers = await asyncio.gather(
            *(
                js.get_last_messages(stream, _with(chunk, along), up_to_seq=up_to_seq)
                for chunk in batch
            )
        )
        for chunk, (messages, as_of) in zip(batch, answers, strict=True):
            yield chunk, messages, as_of


def _shows(messages: list[StoredMessage], witness: Witness) -> bool:
    """Whether the witness's subject came back at the witness's sequence."""
    return any(m.subject == witness.subject and m.seq == witness.seq for m in messages)


def _with(chunk: list[str], subject: str) -> list[str]:
    return chunk if subject in chunk else [*chunk, subject]


def _subject_cost(subject: str) -> int:
    return len(subject.encode()) + 3  # quotes and comma


async def _any_stored(
    bucket: BucketCore, absent: list[str], found: dict[str, StoredMessage], pin: int | None
) -> bool:
    """Whether any of the ``absent`` subjects has a message now (then the pinned read may
    have missed it: its revision at the pin was replaced, or written after an empty first
    answer).

    A replica behind the pin could say no for a key it has not seen yet. An unpinned answer
    reports the replica's last sequence, so each must report at least the pin; a subject
    found by the read is asked along, so that the answer is never empty (an empty one reports
    nothing). Only when nothing was found does the leader say what to ask for and from where.
    An answer that cannot be trusted counts as yes: the read is repeated."""
    js, stream = bucket.js, bucket.stream
    floor = pin or 0
    sentinel = next(iter(found), None)
    if sentinel is None:
        newest = await newest_message(js, stream, f"{bucket.prefix}>")
        if newest is None:
            return False  # nothing is stored at all
        if not newest.literal:
            return True  # nothing to ask along: not known, so read again
        sentinel, floor = newest.subject, max(floor, newest.seq)
    if sentinel in absent:
        return True
    answers = last_messages_along(js, stream, absent, sentinel, None, parallel=1)
    async with contextlib.aclosing(answers) as chunks:
        async for _, messages, replica_last in chunks:
            if replica_last is None or replica_last < floor:
                return True  # a replica behind the pin answered: not known, so read again
            if any(m.subject != sentinel for m in messages):
                return True
    return False


async def _read_by_consumer(
    bucket: BucketCore, subjects: list[str]
) -> tuple[dict[str, StoredMessage], int, bool]:
    """The newest message of each subject through an ordered consumer (last per subject, then
    whatever is written meanwhile, until it has caught up): consistent as of the last message
    it delivered, however busy the writers, when that message ends its batch (returned as the
    third value). Many keys are read from a scan of the whole bucket (the server is slow with
    thousands of filter subjects)."""
    wanted = set(subjects)
    whole = len(subjects) > FILTERED_SCAN
    filters = [f"{bucket.prefix}>"] if whole else subjects
    # A scan of the whole bucket can go on until it stops at the last message of a batch (the
    # newest one is always whole); a filtered one may never see it (it is on another key).
    ends_scan = _ends_batch if whole else None
    found: dict[str, StoredMessage] = {}
    pin = 0
    last: StoredMessage | None = None
    async for message in scan_stream(bucket.js, bucket.stream, filters, ends_scan=ends_scan):
        if message.subject in wanted:
            found[message.subject] = message  # stream order: a later revision replaces
        if message.seq > pin:
            pin, last = message.seq, message
    # The server can say "nothing pending" in the middle of an atomic batch (seen on history-1
    # buckets under a continuous writer): a point inside a batch is not one any reader may see.
    at_boundary = last is None or _ends_batch(last)
    return found, pin, at_boundary


def _ends_batch(message: StoredMessage | PullMessage) -> bool:
    """Whether ``message`` is a plain write or the last message of an atomic batch."""
    return hdr.BATCH_ID not in message.headers or hdr.BATCH_COMMIT in message.headers


def _snapshot(
    bucket: BucketCore,
    wanted: list[str],
    subjects: list[str],
    found: dict[str, StoredMessage],
    pin: int | None,
) -> Snapshot:
    entries: dict[str, Entry] = {}
    for key, subject in zip(wanted, subjects, strict=True):
        message = found.get(subject)
        if message is not None:
            entry = bucket.entry(message)
            if entry.op is Op.PUT:
                entries[key] = entry
    missing = tuple(key for key in wanted if key not in entries)
    return Snapshot(entries, missing, pin or 0)
