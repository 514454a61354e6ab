"""ObjectReader: an object's chunks as an async iterator, digest checked at the end, memory
bounded by the consumer window (about 8 MiB) whatever the object size."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

from jetstream import AsyncResource, OrderedConsumer

from ._errors import DigestMismatchError
from ._io import Hasher
from ._models import ObjectInfo, chunk_subject

if TYPE_CHECKING:
    from ._store import ObjectStore


__all__ = ["WINDOW_BYTES", "ObjectReader"]

WINDOW_BYTES = 8 * 1024 * 1024
"""Bytes of chunks requested or buffered at any time."""


class ObjectReader(AsyncResource):
    """``async with store.open(name) as reader: async for chunk in reader: ...``

    Raises :class:`DigestMismatchError` after the last chunk if the size, chunk count or SHA-256
    digest differ from the object's meta.
    """

    def __init__(self, store: ObjectStore, info: ObjectInfo) -> None:
        self.info = info
        chunk_size = (info.options.max_chunk_size if info.options else 0) or 128 * 1024
        self._consumer = OrderedConsumer(
            store._js,
            store.stream,
            filter_subjects=[chunk_subject(info.bucket, info.nuid)],
            max_messages=max(2, WINDOW_BYTES // chunk_size),
        )
        self._hasher = Hasher()
        self._received = 0
        self._size = 0
        self._done = info.chunks == 0

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> bytes:
        if self._done:
            await self._finish()
            raise StopAsyncIteration
        message = await self._consumer.__anext__()
        chunk = message.data
        self._received += 1
        self._size += len(chunk)
        await self._hasher.update(chunk)
        if self._received == self.info.chunks:
            self._done = True
        return chunk

    async def _finish(self) -> None:
        await self._consumer.close()
        digest = await self._hasher.digest()
        info = self.info
        if self._size != info.size or self._received != info.chunks:
            raise DigestMismatchError(
                f"object {info.name!r}: got {self._size} bytes in {self._received} chunks, "
                f"meta says {info.size} in {info.chunks}"
            )
        if info.digest and _digest_value(digest) != _digest_value(info.digest):
            raise DigestMismatchError(f"object {info.name!r}: digest {digest} != {info.digest}")

    async def read(self) -> bytes:
        """The whole object (for small objects; prefer iterating for large ones).

        Raises:
            DigestMismatchError: size, chunk count or digest differ from the meta record.
        """
        return b"".join([chunk async for chunk in self])

    async def _exit(self, error: BaseException | None) -> None:
        await self._consumer.close()
        self._hasher.close()


def _digest_value(digest: str) -> str:
    """The base64url part of ``SHA-256=<b64>`` (the prefix's case varies between clients)."""
    prefix, _, value = digest.partition("=")
    return value if prefix.upper() == "SHA-256" else digest
