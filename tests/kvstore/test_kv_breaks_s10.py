"""Hostile review, session 10: prepare_many / put_many input checks and get_many against
records other clients wrote. Each test asserts what a user relies on and fails on the code
as reviewed."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import nats
import pytest

import jetstream
import kvstore
from tests.conftest import BucketFactory

# -- prepare_many / put_many: bad input gets a typed error, nothing written ----------------------


@pytest.mark.parametrize("expect", [5, "ab", object()], ids=["int", "str", "object"])
async def test_prepare_many_expect_that_is_not_a_mapping_is_a_typed_error(
    make_bucket: BucketFactory, expect: Any
) -> None:
    """README: no exception of nats-py or msgspec (or Python's dict()) reaches the caller; bad
    input gets a typed error. ``dict(expect or {})`` leaks TypeError / ValueError."""
    bucket = await make_bucket()
    with pytest.raises(jetstream.JetStreamError):
        bucket.prepare_many({"a": b"1"}, expect=expect)
    with pytest.raises(jetstream.JetStreamError):
        await bucket.put_many({"a": b"1"}, expect=expect)
    assert [key async for key in bucket.keys()] == []


async def test_put_many_with_an_unhashable_key_is_a_typed_error(
    make_bucket: BucketFactory,
) -> None:
    """A pair whose key is a list (JSON arrays as CSV/JSON readers give them) must raise
    InvalidKeyError ("key must be a str"), as an int key does; ``{key for key, _ in pairs}``
    raises a raw TypeError first. Same through the typed view."""
    bucket = await make_bucket()
    with pytest.raises(kvstore.InvalidKeyError):
        bucket.prepare_many([(["a"], b"1")])
    with pytest.raises(kvstore.InvalidKeyError):
        await bucket.put_many([(["a"], b"1")])

    class Item(msgspec.Struct):
        n: int

    with pytest.raises(kvstore.InvalidKeyError):
        await bucket.typed(Item).put_many([(["a"], Item(1))])
    assert [key async for key in bucket.keys()] == []


@pytest.mark.parametrize("which", ["expect", "ttl"])
async def test_put_many_stray_keys_of_mixed_types_is_a_typed_error(
    make_bucket: BucketFactory, which: str
) -> None:
    """expect/ttl naming keys that are not written is an InvalidKeyError; when the strays mix
    str and int, ``sorted(strays)`` raises a raw TypeError instead."""
    bucket = await make_bucket()
    strays: dict[Any, Any] = {1: 0, "q": 0} if which == "expect" else {1: "1h", "q": "1h"}
    with pytest.raises(kvstore.InvalidKeyError):
        await bucket.put_many({"a": b"1"}, **{which: strays})
    assert [key async for key in bucket.keys()] == []


@pytest.mark.parametrize("revision", [False, 0.0], ids=["False", "0.0"])
async def test_put_many_expect_false_or_float_zero_is_refused_not_a_create(
    make_bucket: BucketFactory, revision: Any
) -> None:
    """Every other revision argument refuses bools and floats (``expect={"k": True}`` and
    ``{"k": 1.0}`` raise ClientValidationError, so do ``delete(revision=False)`` and
    ``update(..., revision=1.0)``); ``expect={"k": False}`` / ``{"k": 0.0}`` pass ``== 0`` and
    silently become a create that stores the value."""
    bucket = await make_bucket()
    with pytest.raises(jetstream.ClientValidationError):
        bucket.prepare_many({"k": b"1"}, expect={"k": revision})
    with pytest.raises(jetstream.ClientValidationError):
        await bucket.put_many({"k": b"1"}, expect={"k": revision})
    with pytest.raises(kvstore.KeyNotFoundError):
        await bucket.get("k")


# -- get_many against records written by other clients -------------------------------------------


async def test_get_many_over_1000_keys_when_a_peer_stored_a_wildcard_subject_last(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, js: jetstream.JetStream
) -> None:
    """A peer can store ``$KV.<b>.t.>`` literally (the library knows: purge_deletes skips such
    tombstones). If that is the bucket's newest message, ``newest_message`` returns None and
    ``_read_pinned`` takes it for "an empty bucket: every key is missing": get_many of more
    than 1000 keys, from a handle that did not write them, reports every live key missing at
    revision 0 -- a silently wrong snapshot."""
    writer = await make_bucket(history=1)
    keys = [f"k{i}" for i in range(1001)]
    await writer.put_many({key: b"v" for key in keys[:1000]})
    await writer.put(keys[1000], b"v")

    nc = await nats.connect(nats_server.url)
    try:
        await nc.jetstream().publish(f"$KV.{writer.name}.t.>", b"x")
    finally:
        await nc.close()

    reader = await kvstore.open_bucket(js, writer.name)  # no own writes to fall back on
    snapshot = await reader.get_many(keys)
    assert snapshot.missing == ()
    assert len(snapshot) == 1001
    assert snapshot.revision >= 1001


# -- revisions beyond uint64: the server wraps them, the CAS passes --------------------------------


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


async def test_a_batch_to_a_deleted_bucket_fails_at_once_not_after_its_deadline(
    make_bucket: BucketFactory, js: jetstream.JetStream
) -> None:
    """A put to a deleted bucket fails at once (BucketNotFoundError: no stream listens); a
    put_many or a prepared batch waited out its whole commit deadline (30 s by default),
    taking the 503 for a leader election."""
    bucket = await make_bucket()
    prepared = bucket.prepare_many({"a": b"1", "b": b"2"})
    await kvstore.delete_bucket(js, bucket.name)
    async with asyncio.timeout(10):
        with pytest.raises(kvstore.BucketNotFoundError):
            await bucket.put("a", b"1")
        with pytest.raises(kvstore.BucketNotFoundError):
            await bucket.put_many({"a": b"1", "b": b"2"})
        with pytest.raises(kvstore.BucketNotFoundError):
            await prepared.commit()
