"""Upload sources as chunk streams, and the object store's digest format."""

from __future__ import annotations

import base64
import inspect
import os
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from typing import BinaryIO, Protocol, TypeAlias

from jetstream import WrongTypeError
from jetstream._errors import check_bytes_like

from ._source_file import FileChunks

__all__ = ["AsyncReader", "Source", "chunks_of", "digest_text"]


class AsyncReader(Protocol):
    """A binary file read with ``await`` (aiofiles, ``asyncio.StreamReader``)."""

    async def read(self, size: int, /) -> bytes: ...


Source: TypeAlias = (
    "bytes | bytearray | memoryview | str | os.PathLike[str] | BinaryIO | AsyncReader"
    " | Iterable[bytes] | AsyncIterable[bytes]"
)
"""What ``put`` accepts: bytes, a path, a binary file (also one read with ``await``), or an
(async) iterable of bytes."""


def digest_text(raw: bytes) -> str:
    """A SHA-256 digest as the object store writes it: ``SHA-256=<base64url>``.

    Uploads and downloads hash inline (``hashlib.sha256().update`` per chunk): a hashing
    thread, fed per chunk or in 4 MiB batches, was measured slower for both, with up to twice
    the CPU, the GIL changing hands for every chunk."""
    return "SHA-256=" + base64.urlsafe_b64encode(raw).decode()


def chunks_of(source: Source, chunk_size: int) -> tuple[AsyncIterator[bytes], int | None]:
    """The source cut into ``chunk_size`` pieces (the last may be shorter; none when empty),
    and its size when known before reading (bytes, and regular files from where they stand).

    A path or a binary file over a regular file is checked while it is read: a change raises
    SourceChangedError from the chunks (see :mod:`objstore._source_file`).

    Raises (at once, before anything is read or sent):
        WrongTypeError: not a supported source.
        SourceNotFoundError: no file at a path (a ``str`` is always taken as a path).
        UnreadableSourceError: a path that cannot be opened (a directory, no permission).
    """
    if isinstance(source, bytes | bytearray | memoryview):
        view = memoryview(source).cast("B")
        return _from_buffer(view, chunk_size), view.nbytes
    if isinstance(source, str | os.PathLike):
        chunks = FileChunks.of_path(source, chunk_size)
        return chunks, chunks.size
    read = getattr(source, "read", None)
    if inspect.iscoroutinefunction(read):
        return _rechunk(_async_reads(read, chunk_size), chunk_size), None
    if callable(read):
        chunks = FileChunks(source, chunk_size, owned=False)  # type: ignore[arg-type]
        return chunks, chunks.size
    if isinstance(source, AsyncIterable):
        return _rechunk(source, chunk_size), None
    if isinstance(source, Iterable):
        return _rechunk(_as_async(source), chunk_size), None
    raise WrongTypeError(
        f"unsupported source {type(source).__name__}: use bytes, a path, a binary file "
        "(async ones too), or an (async) iterable of bytes"
    )


async def _from_buffer(view: memoryview, chunk_size: int) -> AsyncIterator[bytes]:
    # Slices of the caller's buffer, not copies: hashlib and nats-py take any buffer.
    for start in range(0, len(view), chunk_size):
        yield view[start : start + chunk_size]  # type: ignore[misc]


async def _rechunk(source: AsyncIterable[bytes], chunk_size: int) -> AsyncIterator[bytes]:
    buffer = bytearray()
    async for piece in source:
        buffer += check_bytes_like(piece, "a piece an iterable source yields")
        while len(buffer) >= chunk_size:
            yield bytes(buffer[:chunk_size])
            del buffer[:chunk_size]
    if buffer:
        yield bytes(buffer)


async def _async_reads(
    read: Callable[[int], Awaitable[bytes]], chunk_size: int
) -> AsyncIterator[bytes]:
    # An async reader (aiofiles, asyncio.StreamReader): read(n) may give less than n bytes
    # before its end, which only an empty read marks; _rechunk makes whole chunks of them.
    while chunk := await read(chunk_size):
        yield chunk


async def _as_async(source: Iterable[bytes]) -> AsyncIterator[bytes]:
    for piece in source:
        yield piece
