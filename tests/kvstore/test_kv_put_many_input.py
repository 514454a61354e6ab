"""Bad input to ``prepare_many`` / ``put_many`` gets a typed error and writes nothing: ``expect``
that is no mapping, keys that are no str (unhashable ones too), stray ``expect``/``ttl`` keys of
mixed types, and revisions that are bools or floats."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

import jetstream
import kvstore
from tests.conftest import BucketFactory


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
