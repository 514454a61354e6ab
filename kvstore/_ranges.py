"""Reads of a bucket divided into parts (the Spark ``natskv`` batch and stream readers) that
still read one point in time, each part reading only its share of the stream.

A snapshot "as of ``up_to``" holds each key's last message at or below ``up_to``. How it is
divided depends on the stream (:class:`LastCheck`):

* ``ONLY``: the stream keeps one message per key (history 1), so every message it still
  stores is its key's only, hence last, one. The sequences ``first..up_to`` are cut into
  contiguous ranges and each part reads its range once (a key rewritten after ``up_to`` lost
  its message at or below it: it is absent, as from a whole-stream read at that moment).
* ``KEYS``: with more history, a range cannot tell whether a later range replaces its
  messages. The keys are listed at planning (the server's per-subject index, no messages
  read), divided among the parts, and each part reads its keys' last message at ``up_to``
  with batched direct gets (``multi_last`` with ``up_to_seq``): one message per key.
* ``SUFFIX``: with more history and no direct get, each part reads its range and then on to
  ``up_to`` (headers only) and keeps the keys not seen again: exact, but early parts read more.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Callable

from jetstream import JetStream, MessageNotFoundError, OrderedConsumer, StoredMessage
from jetstream import headers as hdr
from jetstream._consume.ordered import range_window
from jetstream._consume.scan import scan_stream

from ._snapshot import FILTERED_SCAN, Witness, last_messages_along, pinned_last_messages

__all__ = ["LastCheck", "count_end", "read_keys", "read_latest", "split_range", "split_subjects"]

_PARALLEL_GETS = 2  # batched direct gets in flight per part: enough to hide the round trip;
# more only queue at the server (8 timed out, 5 s without an answer, on a loaded machine)


class LastCheck(enum.Enum):
    """How a part decides that a message in its range is its key's last at ``up_to``."""

    ONLY = "only"
    KEYS = "keys"
    SUFFIX = "suffix"

    @classmethod
    def for_stream(cls, history: int, allow_direct: bool) -> LastCheck:
        """The cheapest exact check for a stream keeping ``history`` messages per subject.

        ``KEYS`` reads with direct gets, which any replica may answer; :func:`read_keys`
        checks each answer came from one that has applied ``up_to``."""
        if history == 1:
            return cls.ONLY
        return cls.KEYS if allow_direct else cls.SUFFIX


def split_range(first: int, last: int, parts: int) -> list[tuple[int, int]]:
    """``first..last`` (inclusive) cut into at most ``parts`` contiguous ranges whose sizes
    differ by at most one (fewer ranges when there are fewer sequences; none when empty)."""
    if last < first or parts < 1:
        return []
    span = last - first + 1
    parts = min(parts, span)
    bounds = [first + span * i // parts for i in range(parts + 1)]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(parts)]


def split_subjects(subjects: list[str], parts: int) -> list[list[str]]:
    """``subjects`` cut into at most ``parts`` contiguous slices whose sizes differ by at most
    one (none when there are no subjects)."""
    return [subjects[lo - 1 : hi] for lo, hi in split_range(1, len(subjects), parts)]


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
    subject's last at or below ``up_to``, in stream order (``ONLY`` and ``SUFFIX``).

    Raises:
        JetStreamError: the stream cannot be read (e.g. StreamNotFoundError).
    """
    if hi < lo:
        return []
    latest = await _scan(js, stream, filters, lo, hi)
    if check is LastCheck.ONLY:  # one message per key: the one scanned is its last
        return list(latest.values())
    return await _still_last(js, stream, filters, latest, hi, up_to)


async def _still_last(
    js: JetStream,
    stream: str,
    filters: list[str],
    latest: dict[str, StoredMessage],
    hi: int,
    up_to: int,
) -> list[StoredMessage]:
    """Of each subject's newest message in a scan up to ``hi`` (``latest``), those still its
    last at or below ``up_to``, in stream order.

    One headers-only scan from ``hi + 1`` to the stream's end now: a subject seen there at or
    below ``up_to`` has a later revision (dropped). A subject seen above ``up_to`` was written
    since planning, which can have removed its revision at ``up_to`` before the first scan
    reached it, so that scan kept an older one. The server removes a subject's revisions oldest
    first, so the kept revision still being stored proves that none newer was removed: it is
    kept only then (else the key is left out, as one rewritten beyond the history)."""
    end = (await js.stream_info(stream)).state.last_seq
    replaced: set[str] = set()
    rewritten: set[str] = set()
    if end > hi:
        scan = scan_stream(
            js,
            stream,
            filters,
            last_per_subject=False,
            headers_only=True,
            start_seq=hi + 1,
            max_messages=range_window(hi + 1, end),
        )
        async with contextlib.aclosing(scan) as messages:
            async for message in messages:
                if message.seq > end:
                    break
                (replaced if message.seq <= up_to else rewritten).add(message.subject)
    kept = [m for subject, m in latest.items() if subject not in replaced]
    doubtful = [m for m in kept if m.subject in rewritten]
    gone: set[int] = set()
    for start in range(0, len(doubtful), _CHECKS_IN_FLIGHT):
        batch = doubtful[start : start + _CHECKS_IN_FLIGHT]
        stored = await asyncio.gather(*(_still_stored(js, stream, m.seq) for m in batch))
        gone.update(m.seq for m, there in zip(batch, stored, strict=True) if not there)
    return [m for m in kept if m.seq not in gone]


_CHECKS_IN_FLIGHT = 32


async def read_keys(
    js: JetStream, stream: str, filters: list[str], subjects: list[str], witness: Witness
) -> list[StoredMessage]:
    """Each subject's last message at or below ``witness.seq`` (``KEYS``); a subject with none
    left there (rewritten or purged since, on a bounded history) is absent.

    Batched direct gets, each checked to come from a replica that has applied the witness
    (:func:`~kvstore._snapshot.pinned_last_messages`), asked again while one behind answers.
    After a few tries, or at once when the witness message is gone, a scan of the stream to
    its sequence through a consumer on ``filters`` (the stream leader's view).

    Raises:
        JetStreamError: the stream cannot be read, or has no direct get.
    """
    pin = witness.seq
    for attempt in range(_PINNED_TRIES):
        found = await pinned_last_messages(js, stream, subjects, witness, _PARALLEL_GETS)
        if found is not None:
            return found
        if not await _still_stored(js, stream, pin):
            break  # the witness was rewritten since planning (a hot key)
        await asyncio.sleep(0.05 * 2**attempt)  # a replica catching up takes milliseconds
    current = await _current_last_messages(js, stream, subjects, witness)
    if current is not None:
        unchanged, rewritten = current
        if len(rewritten) <= FILTERED_SCAN:  # few keys written since: read only those
            scanned = await _scan(js, stream, rewritten, 1, pin) if rewritten else {}
            return [*unchanged, *await _still_last(js, stream, rewritten, scanned, pin, pin)]
    wanted = set(subjects)
    scanned = await _scan(js, stream, filters, 1, pin)
    latest = {subject: m for subject, m in scanned.items() if subject in wanted}
    return await _still_last(js, stream, filters, latest, pin, pin)


async def _current_last_messages(
    js: JetStream, stream: str, subjects: list[str], witness: Witness
) -> tuple[list[StoredMessage], list[str]] | None:
    """Each subject's last message now, from replicas that have applied ``witness.seq``:
    those at or below it (their last there too), and the subjects written since (their last at
    ``witness.seq`` is to be found). None when an answer came from a replica behind it, or
    reports no sequence (nothing matched).

    An unpinned answer reports the sequence it is consistent as of, so it needs no witness
    message: this is the read when the witness has been rewritten. The witness's subject is
    asked along so that an answer is never empty.
    """
    pin = witness.seq
    unchanged: list[StoredMessage] = []
    rewritten: list[str] = []
    answers = last_messages_along(js, stream, subjects, witness.subject, None, _PARALLEL_GETS)
    async with contextlib.aclosing(answers) as chunks:
        async for chunk, messages, as_of in chunks:
            if as_of is None or as_of < pin:
                return None
            asked = set(chunk)
            for message in messages:
                if message.subject not in asked:
                    continue  # the witness's subject, asked along only
                if message.seq <= pin:
                    unchanged.append(message)
                else:
                    rewritten.append(message.subject)
    return unchanged, rewritten


async def _still_stored(js: JetStream, stream: str, seq: int) -> bool:
    try:
        await js.get_message(stream, seq, direct=False)
    except MessageNotFoundError:
        return False
    return True


_PINNED_TRIES = 4
"""Pinned reads of a partition's keys before it scans the stream instead."""


async def _scan(
    js: JetStream,
    stream: str,
    filters: list[str],
    lo: int,
    hi: int,
    *,
    headers_only: bool = False,
) -> dict[str, StoredMessage]:
    """The newest message of each subject in ``lo..hi``: one scan from ``lo``, ended at the
    first message past ``hi`` (or at the stream's end)."""
    latest: dict[str, StoredMessage] = {}
    scan = scan_stream(
        js,
        stream,
        filters,
        last_per_subject=False,
        headers_only=headers_only,
        start_seq=lo,
        max_messages=range_window(lo, hi),
    )
    async with contextlib.aclosing(scan) as messages:
        async for message in messages:
            if message.seq > hi:
                break
            latest[message.subject] = message  # stream order: a later message replaces
    return latest


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

    The end never cuts an atomic batch (a ``put_many``, by any client: its stored messages
    keep ``Nats-Batch-Id``, the last one ``Nats-Batch-Commit``): it moves back to before the
    batch, or, when nothing comes before it, on to the batch's end (more than ``rows`` rows).
    ``latest`` is always a stream's last sequence, which no batch straddles (a batch is stored
    at once).

    Raises:
        JetStreamError: the stream cannot be read.
    """
    if latest <= after:
        return latest
    counted = 0
    uncut = _UncutEnd(after)
    async with OrderedConsumer(
        js,
        stream,
        filter_subjects=filters,
        opt_start_seq=after + 1,
        headers_only=True,
        until_caught_up=True,
        max_messages=range_window(after + 1, latest),
    ) as consumer:
        async for message in consumer:
            seq = message.metadata.stream_seq
            if seq > latest:
                break
            uncut.see(seq, message.headers)
            if counts(message.headers):
                counted += 1
            if counted >= rows:
                end = uncut.end(after)
                if end is not None:
                    return end
    return latest


class _UncutEnd:
    """Follows a stream's messages (in order, some filtered out) and knows the last sequence
    a read may end at without cutting an atomic batch: its messages are stored contiguously,
    so a message of another batch, or of none, closes the one before."""

    def __init__(self, after: int) -> None:
        self.last = after  # the newest sequence that cuts no batch
        self._open: str | None = None  # the batch the newest message belongs to, uncommitted

    def see(self, seq: int, headers: dict[str, str]) -> None:
        batch = headers.get(hdr.BATCH_ID) or None
        if self._open is not None and batch != self._open:
            self.last = seq - 1  # the open batch ended before this message
        self._open = batch if batch is not None and hdr.BATCH_COMMIT not in headers else None
        if self._open is None:
            self.last = seq

    def end(self, after: int) -> int | None:
        """Where to end now that enough rows were seen: here, before the open batch, or
        (None) not yet, when the open batch began right at ``after``."""
        if self._open is None or self.last > after:
            return self.last
        return None
