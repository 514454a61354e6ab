"""An object is stored from a binary file read with ``await`` (aiofiles, an
``asyncio.StreamReader``, anything whose ``read`` is a coroutine function), whatever sizes
its reads give; one that yields text fails the upload (UploadFailedError from WrongTypeError,
as a sync file in text mode does) and stores nothing."""

from __future__ import annotations

import asyncio
import os

import pytest

from jetstream import WrongTypeError
from objstore import ObjectStore, UploadFailedError

pytestmark = pytest.mark.integration

CHUNK = 64 * 1024


class _TextReader:
    """An async reader opened in text mode by mistake."""

    def __init__(self) -> None:
        self._left = 3

    async def read(self, size: int = -1) -> str:
        self._left -= 1
        return "text" if self._left >= 0 else ""


async def test_a_stream_reader_is_stored_whole_in_whole_chunks(store: ObjectStore) -> None:
    data = os.urandom(5 * CHUNK + 123)
    reader = asyncio.StreamReader()
    for start in range(0, len(data), 1000):  # reads give 1,000 bytes or less, never a chunk
        reader.feed_data(data[start : start + 1000])
    reader.feed_eof()

    info = await store.put("from-reader", reader, chunk_size=CHUNK)

    assert (info.size, info.chunks) == (len(data), 6)
    assert await store.get_bytes("from-reader") == data


async def test_an_empty_async_reader_stores_an_empty_object(store: ObjectStore) -> None:
    reader = asyncio.StreamReader()
    reader.feed_eof()

    info = await store.put("empty", reader)

    assert info.size == 0
    assert await store.get_bytes("empty") == b""


async def test_an_async_reader_in_text_mode_is_refused_and_stores_nothing(
    store: ObjectStore,
) -> None:
    with pytest.raises(UploadFailedError, match="bytes-like") as failed:
        await store.put("text", _TextReader())

    assert isinstance(failed.value.__cause__, WrongTypeError)
    assert [info.name async for info in store.list()] == []
