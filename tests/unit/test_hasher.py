"""Hasher: the batched hand-off to the hashing thread gives the digest of every chunk, in
order, whatever the chunk and batch sizes, and keeps at most one batch gathered."""

from __future__ import annotations

import base64
import hashlib
import os

import pytest

from objstore._io import HASH_BATCH_BYTES, Hasher


def _expected(chunks: list[bytes]) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(b"".join(chunks)).digest()).decode()


@pytest.mark.parametrize(
    ("chunk_size", "count", "batch"),
    [
        (128 * 1024, 100, HASH_BATCH_BYTES),  # batches handed over while chunks keep coming
        (1, 1000, 16),  # tiny chunks, many batches
        (1000, 7, 3000),  # a batch boundary inside the stream, a partial batch at the end
        (5000, 3, 1024 * 1024),  # never a full batch: all hashed by digest()
        (5000, 3, 0),  # every chunk handed over on its own (uploads)
    ],
)
async def test_digest_of_all_chunks_in_order(chunk_size: int, count: int, batch: int) -> None:
    chunks = [os.urandom(chunk_size) for _ in range(count)]
    hasher = Hasher(batch)
    for chunk in chunks:
        await hasher.update(chunk)
    assert await hasher.digest() == _expected(chunks)


async def test_memoryview_chunks_and_no_chunks() -> None:
    data = os.urandom(300_000)
    view = memoryview(data)
    hasher = Hasher(100_000)
    for start in range(0, len(data), 65536):
        await hasher.update(view[start : start + 65536])  # type: ignore[arg-type]
    assert await hasher.digest() == _expected([data])
    assert await Hasher().digest() == _expected([])


async def test_gathered_bytes_stay_below_one_batch() -> None:
    hasher = Hasher(10_000)
    for _ in range(50):
        await hasher.update(os.urandom(3000))
        assert hasher._batched < 10_000  # a full batch is handed over at once
    await hasher.digest()
