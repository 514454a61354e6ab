"""KeyWatcher: a bucket's changes as an async iterator of entries, on an ordered consumer that
survives reconnects and server restarts, with expiry markers as their own ``Op.EXPIRED``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Self

from jetstream import AckReply, AsyncListing, ClientValidationError, OrderedConsumer, PullMessage
from jetstream import headers as hdr
from jetstream._consume.pull_message import lacks_headers
from jetstream._consume.scan import scan_stream
from jetstream._resource import AsyncResource

from ._core import BucketCore
from ._errors import KeyDecodeError, KeyNotFoundError
from ._keys import validate_revision
from ._models import Entry, Op, op_from_headers

__all__ = ["History", "KeyWatcher", "iter_keys"]

_log = logging.getLogger("kvstore")


def _skip_foreign(bucket: BucketCore, error: KeyDecodeError) -> None:
    # A key the codec cannot decode was not written through it: no user key names it, so
    # the codec's view of the bucket (keys, watch) leaves it out, with a trace in the log.
    _log.warning("bucket %r: skipping a key its key codec cannot decode: %s", bucket.name, error)


def entry_from(
    bucket: BucketCore,
    message: PullMessage,
    meta: AckReply | None = None,
    *,
    headers_only: bool = False,
) -> Entry:
    """The entry ``message`` stands for (``meta``: its metadata, when already parsed;
    ``headers_only``: delivered without its value)."""
    meta = meta or message.metadata
    # A put without a TTL in a bucket without value stages (which read headers of their own)
    # needs no header: its block (put_many's batch headers, anything a peer added) is then
    # never parsed.
    if not bucket.value_stages and lacks_headers(message, _ENTRY_HEADERS):
        headers = _NO_HEADERS
    else:
        headers = message.headers
    return bucket.entry_of(
        message.subject,
        message.data,
        meta.stream_seq,
        meta.time_ns,
        headers,
        meta.pending,
        headers_only=headers_only,
    )


_ENTRY_HEADERS = (hdr.KV_OPERATION.encode(), hdr.MARKER_REASON.encode(), hdr.TTL.encode())
"""The headers an entry is made of: its op (see ``op_from_headers``) and its TTL."""
_NO_HEADERS: dict[str, str] = {}  # never changed: entry_of only reads headers


class KeyWatcher(AsyncResource):
    """Changes of the keys matching the filters, in revision order, each revision once.

    First the current value of each key (or its whole history with ``include_history``, or
    nothing with ``updates_only``), then every change as it happens. :attr:`initial_done` is set
    once that first part has been delivered. Tombstones arrive as ``Op.DELETE``/``Op.PURGE`` and
    server expiry markers as ``Op.EXPIRED``, unless ``ignore_deletes``. With ``meta_only`` the
    values are left out. After a disconnect or a server restart the watch resumes after the last
    revision it delivered (one lost before the first entry starts over from the values current
    then). Revisions that the bucket's ``history`` limit removed while the watch was away are
    not delivered; the key's newer ones are.
    """

    def __init__(
        self,
        bucket: BucketCore,
        keys: str | list[str] = ">",
        *,
        include_history: bool = False,
        updates_only: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        resume_from: int | None = None,
        heartbeat: float = 5.0,
    ) -> None:
        if include_history and updates_only:
            raise ClientValidationError("include_history and updates_only exclude each other")
        if resume_from is not None:
            if updates_only:
                raise ClientValidationError("resume_from and updates_only exclude each other")
            validate_revision(resume_from, allow_zero=False, what="resume_from")
        self._core = bucket
        self._ignore_deletes = ignore_deletes
        self._updates_only = updates_only
        self._meta_only = meta_only
        policy = "all" if include_history else "new" if updates_only else "last_per_subject"
        self._consumer = OrderedConsumer(
            bucket.js,
            bucket.stream,
            filter_subjects=bucket.filter_subjects(keys),
            deliver_policy=policy,
            opt_start_seq=resume_from or 0,
            headers_only=meta_only,
            heartbeat=heartbeat,
            detect_recreation=True,  # a watch never goes on in a bucket created again
        )
        self.initial_done = self._consumer.initial_done
        """Set once the initial values (or history) have been delivered."""
        self._started = False

    @property
    def resets(self) -> int:
        """How many times the watch re-created its consumer (after reconnects, restarts,
        missed heartbeats): it resumed after the last delivered revision each time."""
        return self._consumer.resets

    @property
    def skipped(self) -> int:
        """Messages the watch skipped because their subject is not UTF-8 (no key names them;
        any client allowed to publish on the bucket's subjects can store one): each was
        reported once, as a logged warning naming its stream sequence."""
        return self._consumer.skipped

    async def _start(self) -> None:
        async with self._core.missing:
            await self._consumer.start()  # cancelled midway: the next read finishes it
        self._started = True
        if self._updates_only:
            self.initial_done.set()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Entry:
        # The per-event path: a message already here, in order, becomes the entry without
        # the awaits of _next_entry (which handles everything else).
        message = self._consumer.next_nowait() if self._started else None
        if message is not None:
            entry = self._entry_of(message)
            if entry is not None:
                return entry
        entry = await self._next_entry(until_initial_done=False)
        assert entry is not None
        return entry

    def initial(self) -> AsyncListing[Entry]:
        """The entries of the snapshot part (the current values, or the history with
        ``include_history``; none with ``updates_only``): ``async for`` or ``await`` (a list),
        ending once it has been delivered, also when its last messages are left out
        (tombstones with ``ignore_deletes``, a key the key codec cannot decode, a subject that
        is not UTF-8), where a loop over the watch checking :attr:`initial_done` after each
        entry would wait for the next change.
        Iterate the watch itself afterwards for the changes::

            async with bucket.watch("alice.>") as watcher:
                async for entry in watcher.initial(): ...   # what is there now
                async for entry in watcher: ...             # then every change

        Raises:
            JetStreamError: as iteration does.
        """
        return AsyncListing(self._initial())

    async def _initial(self) -> AsyncIterator[Entry]:
        while (entry := await self._next_entry(until_initial_done=True)) is not None:
            yield entry

    async def _next_entry(self, *, until_initial_done: bool) -> Entry | None:
        if not self._started:
            await self._start()
        consumer = self._consumer
        while True:
            if until_initial_done and self.initial_done.is_set():
                return None
            message = consumer.next_nowait() or await self._next_message(until_initial_done)
            if message is None:
                return None
            entry = self._entry_of(message)
            if entry is not None:
                return entry

    def _entry_of(self, message: PullMessage) -> Entry | None:
        """The entry ``message`` stands for; None if the watch leaves it out (a key the key
        codec cannot decode, a tombstone or marker with ``ignore_deletes``)."""
        try:
            entry = entry_from(self._core, message, headers_only=self._meta_only)
        except KeyDecodeError as exc:
            _skip_foreign(self._core, exc)
            return None
        if self._ignore_deletes and entry.op is not Op.PUT:
            return None
        return entry

    async def _next_message(self, until_initial_done: bool) -> PullMessage | None:
        """The next message, from the server (the watch ends with BucketNotFoundError once
        the bucket is deleted, even if a bucket of its name was created again meanwhile);
        None as :meth:`OrderedConsumer.next_message` says."""
        async with self._core.missing:
            return await self._consumer.next_message(until_initial_done=until_initial_done)

    async def stop(self) -> None:
        """Stop watching and delete the consumer."""
        await self._consumer.close()

    async def _enter(self) -> None:
        if not self._started:
            try:
                await self._start()
            except asyncio.CancelledError:  # no exit follows a cancelled entry: clean up now
                await self.stop()
                raise

    async def _exit(self, error: BaseException | None) -> None:
        await self.stop()


async def iter_keys(bucket: BucketCore, subjects: list[str]) -> AsyncIterator[str]:
    """Keys with a live value on ``subjects`` (:meth:`BucketCore.filter_subjects`), filtered
    by the server."""
    scan = scan_stream(bucket.js, bucket.stream, subjects, headers_only=True)
    # aclosing: a caller leaving early closes this generator, and the scan's consumer is
    # deleted then, not whenever the garbage collector finds the scan.
    async with bucket.missing, contextlib.aclosing(scan) as messages:
        async for message in messages:
            if op_from_headers(message.headers) is Op.PUT:
                try:
                    yield bucket.decode_key(message.subject[len(bucket.prefix) :])
                except KeyDecodeError as exc:
                    _skip_foreign(bucket, exc)


class History:
    """Every stored revision of ``key`` (whose validated subject is ``subject``), oldest
    first, tombstones and markers included. A revision that does not open (a value stage
    refused it) raises from ``__anext__``, and the next call goes on with the next revision,
    as a watch does: the value is opened here, outside the generator reading the messages,
    which an exception would end."""

    def __init__(self, bucket: BucketCore, key: str, subject: str) -> None:
        self._core = bucket
        self._messages = _history_messages(bucket, key, subject)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Entry:
        async with self._core.missing:
            message = await self._messages.__anext__()
        return entry_from(self._core, message)

    async def aclose(self) -> None:
        """Stop reading (the consumer is deleted)."""
        await self._messages.aclose()


async def _history_messages(
    bucket: BucketCore, key: str, subject: str
) -> AsyncGenerator[PullMessage, None]:
    found = False
    async with OrderedConsumer(
        bucket.js,
        bucket.stream,
        filter_subjects=[subject],
        deliver_policy="all",
        until_caught_up=True,
    ) as consumer:
        async for message in consumer:
            found = True
            yield message
    if not found:
        raise KeyNotFoundError(key, f"key {key!r} has no history")
