"""A blocking caller's upload source, made fit for the event loop that uploads it.

The async ``put`` iterates a plain iterable on its event loop. The blocking twin's loop is
shared by every thread using the handle, and a caller's generator may block (a network
stream) or itself make blocking calls (a blocking :class:`ObjectReader` being copied),
which on the loop's own thread would stall every other call or be refused. So here an
iterable is advanced in a worker thread, about one chunk's worth of pieces per hop, as
files already are read.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator

from jetstream._errors import check_bytes_like

from ._io import Source

__all__ = ["pulled_in_threads"]


def pulled_in_threads(source: Source, batch_bytes: int) -> Source:
    """``source`` with a plain iterable of bytes replaced by an async iterator that
    advances it in worker threads, ``batch_bytes`` (or the rest) at a time. Bytes, paths,
    files (read in threads already) and async iterables are returned as they are; so is
    anything else (the upload refuses it with its own error)."""
    if (
        isinstance(source, bytes | bytearray | memoryview | str | os.PathLike | AsyncIterable)
        or callable(getattr(source, "read", None))
        or not isinstance(source, Iterable)
    ):
        return source
    return _pulled(iter(source), max(1, batch_bytes))


async def _pulled(pieces: Iterator[bytes], batch_bytes: int) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    ended = threading.Event()
    try:
        while batch := await loop.run_in_executor(None, _take, pieces, batch_bytes, ended):
            yield batch
    finally:  # cancelled (Ctrl-C) or closed: a batch being taken stops after its piece
        ended.set()


def _take(pieces: Iterator[bytes], batch_bytes: int, ended: threading.Event) -> bytes:
    """The next pieces joined, at least ``batch_bytes`` of them unless the iterable ends
    first (empty: it has ended) or the upload does. Runs in a worker thread.

    Raises:
        WrongTypeError: a piece is not bytes-like (as the async upload says it).
    """
    batch = bytearray()
    for piece in pieces:
        batch += check_bytes_like(piece, "a piece an iterable source yields")
        if len(batch) >= batch_bytes or ended.is_set():
            break
    return bytes(batch)
