"""digest_text: the object store's digest format (``SHA-256=`` and base64url with padding, as
nats.go and nats-py write it), for the empty object and for chunks hashed one by one."""

from __future__ import annotations

import hashlib
import os

from objstore._io import digest_text


def test_empty_object() -> None:
    assert digest_text(hashlib.sha256().digest()) == (
        "SHA-256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU="
    )


def test_chunks_hashed_one_by_one_as_memoryviews() -> None:
    data = os.urandom(300_000)
    view = memoryview(data)
    sha = hashlib.sha256()
    for start in range(0, len(data), 65536):
        sha.update(view[start : start + 65536])  # uploads hash slices of the caller's buffer
    assert digest_text(sha.digest()) == digest_text(hashlib.sha256(data).digest())
    assert "+" not in digest_text(sha.digest()) and "/" not in digest_text(sha.digest())
