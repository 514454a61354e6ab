"""ChunkReader (``objstore.ObjectReader``): an object's chunks as an async iterator, digest
checked at the end, memory bounded by the consumer window (about 8 MiB) whatever the object
size, and time bounded when the chunks go away or the server stops answering."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Self

import nats.errors

from jetstream import (
    ClientValidationError,
    JetStreamError,
    MessageNotFoundError,
    OrderedConsumer,
    PullMessage,
    RequestTimeoutError,
    WrongEventLoopError,
)
from jetstream._resource import AsyncResource

from ._core import StoreCore
from ._errors import DigestMismatchError, ObjectNotFoundError
from ._feed import ChunkFeed
from ._io import digest_text
from ._models import DEFAULT_CHUNK_SIZE, ObjectInfo, chunk_subject
from ._trust import check_readable

__all__ = [
    "DEFAULT_STALL_TIMEOUT",
    "FEED_SHARE",
    "IDLE_CHECK",
    "MAX_WINDOW_MESSAGES",
    "WINDOW_BYTES",
    "ChunkReader",
    "check_stall_timeout",
    "window_messages",
]

WINDOW_BYTES = 8 * 1024 * 1024
"""Bytes of chunks requested or buffered at any time."""

DEFAULT_STALL_TIMEOUT = 30.0
"""Seconds a read may go without receiving a chunk before it fails (RequestTimeoutError)."""

MAX_WINDOW_MESSAGES = 1024
"""Chunks requested or buffered at any time, whatever chunk size a meta record claims."""

IDLE_CHECK = 1.0
"""Seconds without a chunk after which a read checks that its object is still there."""

FEED_SHARE = 4
"""One part in this many of the window is buffered by the reader's feed (the rest requested)."""


class ChunkReader(AsyncResource):
    """The reading of one object's chunks from a :class:`StoreCore`: what
    :class:`objstore.ObjectReader` does (see it for the guarantees and errors)."""

    def __init__(
        self, store: StoreCore, info: ObjectInfo, *, stall_timeout: float = DEFAULT_STALL_TIMEOUT
    ) -> None:
        check_stall_timeout(stall_timeout)
        check_readable(info)  # checked where decoded; again here for infos built by callers
        self.info = info
        self._store = store
        self._stall_timeout = float(stall_timeout)
        # The chunks are in this store's stream, whatever the record says about its bucket.
        self._subject = chunk_subject(store.name, info.nuid)
        # The window is shared: most of it requested from the server, the rest buffered by
        # the feed, so a read holds no more chunks than before the feed (and no later ones).
        window = window_messages(info)
        buffered = max(1, window // FEED_SHARE)
        self._consumer = OrderedConsumer(
            store.js,
            store.stream,
            filter_subjects=[self._subject],
            max_messages=max(1, window - buffered),
            memory_bytes=0,  # the window above is counted in chunks of a known size
        )
        self._feed: ChunkFeed[PullMessage] = ChunkFeed(self._consumer, buffered)
        # Hashed inline: a thread hashing in parallel was measured slower here (0.70-0.82x
        # against 0.73-0.92x of the transport, and 40-50 ms more CPU per 128 MiB): handing
        # the GIL back and forth for every chunk costs more than the hashing it overlaps.
        self._sha = hashlib.sha256()
        self._received = 0
        self._last_seq = 0  # stream sequence of the last chunk taken
        self._size = 0
        self._short_checked = False  # the server's pending count was checked against the meta
        self._started = False
        self._done = info.chunks == 0
        self._plain: bool | None = None  # encrypted store: whether the chunks so far were plain

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> bytes:
        try:
            async with self._store.missing:  # the store deleted: StoreNotFoundError
                return await self._next_chunk()
        except (StopAsyncIteration, WrongEventLoopError):
            raise  # (from another loop nothing can be ended: leaving the block in its own does)
        except Exception:
            # Read without ``async with``, a failed read would leave the feed's task waiting
            # and the consumer on the server: end both here (the errors above say why).
            await self._exit(None)
            raise

    async def _next_chunk(self) -> bytes:
        if self._done:
            await self._finish()
            raise StopAsyncIteration
        message = await self._next_message()
        chunk = message.data
        self._last_seq = message.metadata.stream_seq
        self._received += 1
        self._size += len(chunk)
        if self._size > self.info.size:  # a lying record: fail before buffering the rest
            raise DigestMismatchError(
                f"object {self.info.name!r}: more than the {self.info.size} bytes its meta "
                f"record promises after {self._received} of {self.info.chunks} chunks"
            )
        chunk = self._plaintext(message)
        if self._plain is not False:
            # The digest is a plain object's only check. A sealed chunk's tag authenticates
            # its bytes and its place already (a chunk changed, moved, dropped or cut short
            # fails, whatever digest a forged record carries), so its digest is left to peers.
            self._sha.update(message.data)
        if self._received == self.info.chunks:
            self._done = True
        elif message.metadata.pending == 0:
            await self._check_still_there()  # the server has nothing more for us: provable now
        elif message.metadata.pending < self.info.chunks - self._received:
            await self._short()
        return chunk

    def _plaintext(self, message: PullMessage) -> bytes:
        """The chunk decrypted when the store is encrypted (the bytes as stored otherwise).

        Raises:
            DecryptionError, UnknownKeyIdError, PlaintextValueError: see ChunkCipher.open.
        """
        cipher = self._store.cipher
        if cipher is None:
            return message.data
        index = self._received - 1
        chunk, self._plain = cipher.open(
            self._store.name,
            self.info.name,
            self.info.nuid,
            index,
            index == self.info.chunks - 1,
            message.data,
            message.headers,
            plain=self._plain,
        )
        return chunk

    async def _next_message(self) -> PullMessage:
        """The next chunk's message: at once when the feed has one buffered; otherwise
        re-checking the object while none comes, and failing after ``stall_timeout`` without
        one. The consumer is never cancelled between checks (that could cut a consumer reset
        in half): the feed's task keeps awaiting it."""
        if self._started:
            message = self._feed.take()
            if message is not None:
                return message
        # About to wait: only in the context's own event loop can the chunks ever arrive.
        self._store.js.ensure_open()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._stall_timeout
        if not self._started:
            await self._start(deadline - loop.time())
            self._feed.start()
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise self._stalled()
            if await self._feed.wait(min(IDLE_CHECK, remaining)):
                message = self._feed.take()
                if message is not None:
                    return message
            else:
                await self._check_still_there()

    async def _start(self, timeout: float) -> None:
        """Create the consumer; when it counts fewer chunks than the meta promises, check at
        once (chunks purged before the read began end it now, not after an idle second)."""
        self._started = True
        try:
            await asyncio.wait_for(self._consumer.start(), timeout)
        except TimeoutError:
            raise self._stalled() from None
        pending = self._consumer.initial_pending
        if pending is not None and pending < self.info.chunks:
            await self._check_still_there()

    def _stalled(self) -> RequestTimeoutError:
        return RequestTimeoutError(
            f"object {self.info.name!r}: no chunk for {self._stall_timeout:g}s "
            f"(stall_timeout) after {self._received} of {self.info.chunks}"
        )

    async def _short(self) -> None:
        """The server counts fewer chunks left than the meta promises: find out why, once."""
        if not self._short_checked:
            self._short_checked = True
            await self._check_still_there()

    async def _check_still_there(self) -> None:
        """Raise if the object's next chunk is gone: ObjectNotFoundError when its meta record
        changed (deleted, replaced: both write the meta first, then purge the chunks),
        DigestMismatchError when not. Return while the next chunk is there (a renamed object
        still reads whole) or the server cannot answer (the stall timeout decides then)."""
        info, store = self.info, self._store
        direct = None if store.direct else False
        try:
            after = self._last_seq + 1  # the feed may have read further ahead
            # One request's time: reads are retried until the context's retry_deadline, and
            # a server that cannot answer is for the stall timeout to judge.
            async with asyncio.timeout(store.js.timeout):
                await store.js.get_next_message(store.stream, self._subject, after, direct=direct)
            return
        except MessageNotFoundError:
            pass
        except (JetStreamError, nats.errors.Error, OSError, TimeoutError):
            return
        progress = f"{self._received} of {info.chunks} chunks read"
        try:  # the server just answered: this read may ride out an election, to say why
            current = await store.current_info(info.name, include_deleted=True)
        except (JetStreamError, nats.errors.Error, OSError):
            current = info  # unknown: the chunks are gone all the same
        if current is None or current.deleted or current.nuid != info.nuid:
            raise ObjectNotFoundError(
                f"object {info.name!r} was deleted or replaced while being read ({progress})"
            )
        raise DigestMismatchError(
            f"object {info.name!r}: chunks missing after {progress} (expired or purged) while "
            "its meta record is unchanged"
        )

    async def _finish(self) -> None:
        self._store.js.check_loop()  # the feed's task can only be stopped from its own loop
        await self._feed.close()
        await self._consumer.close()
        cipher = self._store.cipher
        if cipher is not None and self.info.chunks == 0:
            cipher.check_empty(self.info.name, self.info.headers)
        info = self.info
        if self._size != info.size or self._received != info.chunks:
            raise DigestMismatchError(
                f"object {info.name!r}: got {self._size} bytes in {self._received} chunks, "
                f"meta says {info.size} in {info.chunks}"
            )
        if self._plain is False:
            return  # every chunk was authenticated, the last one as the last
        digest = digest_text(self._sha.digest())
        if info.digest and _digest_value(digest) != _digest_value(info.digest):
            raise DigestMismatchError(f"object {info.name!r}: digest {digest} != {info.digest}")

    async def read(self) -> bytes:
        """The whole object (for small objects; prefer iterating for large ones).

        Raises:
            DigestMismatchError: size, chunk count or digest differ from the meta record.
        """
        return b"".join([chunk async for chunk in self])

    async def _exit(self, error: BaseException | None) -> None:
        self._store.js.check_loop()  # the feed's task can only be stopped from its own loop
        await self._feed.close()  # a failure after the read ended is moot
        await self._consumer.close()


def window_messages(info: ObjectInfo) -> int:
    """Chunks requested at a time: about :data:`WINDOW_BYTES` at the record's chunk size (its
    ``max_chunk_size``, or its average chunk), at most :data:`MAX_WINDOW_MESSAGES` whatever a
    record claims (a record claiming 1-byte chunks asked for 8 million)."""
    claimed = info.options.max_chunk_size if info.options else 0
    average = -(-info.size // info.chunks) if info.chunks > 0 else 0
    chunk_size = max(claimed, average) or DEFAULT_CHUNK_SIZE
    return max(2, min(MAX_WINDOW_MESSAGES, WINDOW_BYTES // chunk_size))


def check_stall_timeout(stall_timeout: float) -> None:
    """Raises ClientValidationError: not a positive number of seconds."""
    if (
        isinstance(stall_timeout, bool)
        or not isinstance(stall_timeout, int | float)
        or not 0 < stall_timeout < float("inf")
    ):
        raise ClientValidationError(f"stall_timeout must be positive seconds: {stall_timeout!r}")


def _digest_value(digest: str) -> str:
    """The base64url part of ``SHA-256=<b64>`` (the prefix's case varies between clients)."""
    prefix, _, value = digest.partition("=")
    return value if prefix.upper() == "SHA-256" else digest
