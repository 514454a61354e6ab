"""Reads of a bucket's stream divided into sequence ranges, for readers that split the work
into parts (the Spark ``natskv`` batch and stream readers) and still read one point in time.

A snapshot "as of ``up_to``" holds each key's last message at or below ``up_to``. The stream's
sequences ``first..up_to`` are cut into contiguous ranges; each part reads only its own range
and keeps the messages that are their key's last at ``up_to``, so every key is kept by exactly
the one part whose range holds that message. How a part knows a message is the last one:

* ``ONLY``: the stream keeps one message per key (history 1), so every message it still
  stores is its key's only, hence last, one (a key rewritten after ``up_to`` lost its message
  at or below it: that key is absent, as it is from a whole-stream read at that moment);
* ``DIRECT``: batched direct gets (``multi_last`` with ``up_to_seq``) answer each key seen in
  the range, and a key is kept when the answer lies in the range (the answer's payload is the
  row: the range itself is read headers-only);
* ``SUFFIX``: without direct get, the part reads on from its range to ``up_to`` (headers
  only past the range) and keeps the keys not seen again (slower: early parts read more).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable

from jetstream import JetStream, OrderedConsumer, PullMessage, StoredMessage

from ._snapshot import _chunks

__all__ = ["LastCheck", "count_end", "read_latest", "split_range"]

_PARALLEL_GETS = 8  # batched direct gets in flight at once per part


class LastCheck(enum.Enum):
    """How a part decides that a message in its range is its key's last at ``up_to``."""

    ONLY = "only"
    DIRECT = "direct"
    SUFFIX = "suffix"

    @classmethod
    def for_stream(cls, history: int, allow_direct: bool) -> LastCheck:
        """The cheapest exact check for a stream keeping ``history`` messages per subject."""
        if history == 1:
            return cls.ONLY
        return cls.DIRECT if allow_direct else cls.SUFFIX


def split_range(first: int, last: int, parts: int) -> list[tuple[int, int]]:
    """``first..last`` (inclusive) cut into at most ``parts`` contiguous ranges whose sizes
    differ by at most one (fewer ranges when there are fewer sequences; none when empty)."""
    if last < first or parts < 1:
        return []
    span = last - first + 1
    parts = min(parts, span)
    bounds = [first + span * i // parts for i in range(parts + 1)]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(parts)]


async def read_latest(
    js: JetStream,
    stream: str,
    filters: list[str],
    lo: int,
    hi: int,
    up_to: int,
    check: LastCheck,
) -> list[StoredMessage]:
    """The messages with sequences in ``lo..hi`` (matching ``filters``) that are their
    subject's last at or below ``up_to``, in stream order.

    Raises:
        JetStreamError: the stream cannot be read (e.g. StreamNotFoundError).
    """
    if hi < lo:
        return []
    if check is LastCheck.ONLY or hi >= up_to:  # nothing after the range can replace a message
        return [_stored(m) for m in (await _scan(js, stream, filters, lo, hi)).values()]
    if check is LastCheck.DIRECT:
        seen = await _scan(js, stream, filters, lo, hi, headers_only=True)
        answers = await _last_at(js, stream, list(seen), up_to)
        return sorted((m for m in answers if lo <= m.seq <= hi), key=lambda m: m.seq)
    latest = await _scan(js, stream, filters, lo, hi)
    later = await _scan(js, stream, filters, hi + 1, up_to, headers_only=True)
    return [_stored(m) for subject, m in latest.items() if subject not in later]


async def _scan(
    js: JetStream,
    stream: str,
    filters: list[str],
    lo: int,
    hi: int,
    *,
    headers_only: bool = False,
) -> dict[str, PullMessage]:
    """The newest message of each subject in ``lo..hi``: one ordered consumer from ``lo``,
    ended at the first message past ``hi`` (or at the stream's end)."""
    latest: dict[str, PullMessage] = {}
    async with OrderedConsumer(
        js,
        stream,
        filter_subjects=filters,
        opt_start_seq=lo,
        headers_only=headers_only,
        until_caught_up=True,
    ) as consumer:
        async for message in consumer:
            if message.metadata.stream_seq > hi:
                break
            latest[message.subject] = message  # stream order: a later message replaces
    return latest


async def _last_at(
    js: JetStream, stream: str, subjects: list[str], up_to: int
) -> list[StoredMessage]:
    """Each subject's last message at or below ``up_to`` (batched direct gets, several in
    flight); a subject with none left there is absent."""
    chunks = _chunks(subjects, js.nc.max_payload)
    found: list[StoredMessage] = []
    for start in range(0, len(chunks), _PARALLEL_GETS):
        answers = await asyncio.gather(
            *(
                js.get_last_messages(stream, chunk, up_to_seq=up_to)
                for chunk in chunks[start : start + _PARALLEL_GETS]
            )
        )
        for messages, _ in answers:
            found.extend(messages)
    return found


def _stored(message: PullMessage) -> StoredMessage:
    meta = message.metadata
    return StoredMessage(
        subject=message.subject,
        seq=meta.stream_seq,
        time=meta.time,
        headers=message.headers,
        data=message.data,
    )


async def count_end(
    js: JetStream,
    stream: str,
    filters: list[str],
    after: int,
    latest: int,
    rows: int,
    counts: Callable[[dict[str, str]], bool],
) -> int:
    """The sequence of the ``rows``-th message after ``after`` (and at most ``latest``) for
    which ``counts(headers)`` holds, or ``latest`` when there are fewer: where a batch of at
    most ``rows`` rows ends. Reads headers only, and only as far as that end.

    Raises:
        JetStreamError: the stream cannot be read.
    """
    if latest <= after:
        return latest
    counted = 0
    async with OrderedConsumer(
        js,
        stream,
        filter_subjects=filters,
        opt_start_seq=after + 1,
        headers_only=True,
        until_caught_up=True,
    ) as consumer:
        async for message in consumer:
            seq = message.metadata.stream_seq
            if seq > latest:
                break
            if counts(message.headers):
                counted += 1
                if counted == rows:
                    return seq
    return latest
