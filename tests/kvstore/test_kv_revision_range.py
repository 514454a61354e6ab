"""Revisions past the server's range (uint64) are refused before they reach it: the server reads
them modulo 2**64, so an update could overwrite a value it was meant to protect; get and watch
raise their documented errors."""

from __future__ import annotations

import pytest

import jetstream
import kvstore
from tests.conftest import BucketFactory


async def test_update_with_a_revision_past_uint64_never_overwrites(
    make_bucket: BucketFactory,
) -> None:
    """validate_revision accepts any int >= 1; the server reads
    ``Nats-Expected-Last-Subject-Sequence`` modulo 2**64, so ``2**64 + current`` passes the
    compare-and-set and overwrites the value (and ``2**64`` on a missing key acts as create).
    A revision the server cannot represent must be refused (ClientValidationError) or fail
    (WrongRevisionError), never store."""
    bucket = await make_bucket(history=5)
    await bucket.put("k", b"0")
    current = await bucket.put("k", b"1")
    refused = (jetstream.ClientValidationError, kvstore.WrongRevisionError)
    with pytest.raises(refused):
        await bucket.update("k", b"HIJACK", 2**64 + current)
    with pytest.raises(refused):
        await bucket.put_many({"k": b"HIJACK"}, expect={"k": 2**64 + current})
    with pytest.raises(refused):
        await bucket.delete("k", revision=2**64 + current)
    with pytest.raises(refused):
        await bucket.update("missing", b"x", 2**64)
    assert (await bucket.get("k")).value == b"1"
    with pytest.raises(kvstore.KeyNotFoundError):
        await bucket.get("missing")


async def test_get_and_watch_with_a_revision_past_uint64_raise_documented_errors(
    make_bucket: BucketFactory,
) -> None:
    """``get(key, revision=2**64)`` raises ServerError "408 Malformed Request" (documented:
    KeyNotFoundError, InvalidKeyError) and ``watch(resume_from=2**64)`` an
    InvalidStreamConfigError about Go's JSON decoding; both are input the client can refuse
    before sending (ClientValidationError), as it refuses resume_from=0."""
    bucket = await make_bucket()
    await bucket.put("k", b"1")
    with pytest.raises((kvstore.KeyNotFoundError, jetstream.ClientValidationError)):
        await bucket.get("k", revision=2**64)
    with pytest.raises(jetstream.ClientValidationError):
        async with bucket.watch(resume_from=2**64):
            pass
