"""Bad input to the codec, typed and encryption APIs gets an error from the library's tree
and writes nothing; messages from other clients decode or get a typed error. Each case let a
raw TypeError, ValueError, AttributeError, NameError, RecursionError or AssertionError out
before (hostile review helper-35)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from nats.js import JetStreamContext

import jetstream
import kvstore
from jetstream import ClientValidationError, InvalidKeyringError, Keyring, WrongTypeError
from kvstore import Base64KeyCodec, EncryptedKeyCodec, PathKeyCodec
from tests.conftest import BucketFactory

RING = Keyring({"k1": bytes(range(32))}, primary="k1")

CALLS: dict[str, tuple[Callable[[kvstore.Bucket], Awaitable[Any]], type[Exception]]] = {
    "put(str value)": (lambda b: b.put("k", "a str"), WrongTypeError),
    "put(None value)": (lambda b: b.put("k", None), WrongTypeError),
    "put_many(None)": (lambda b: b.put_many(None), WrongTypeError),
    "put_many(list of str)": (lambda b: b.put_many(["abc"]), WrongTypeError),
    "put_many(str)": (lambda b: b.put_many("abc"), WrongTypeError),
    "put_many(max_keys='5')": (
        lambda b: b.put_many({"a": b"x"}, max_keys="5"),
        ClientValidationError,
    ),
    "put_many(deadline='5')": (
        lambda b: b.put_many({"a": b"x"}, deadline="5"),
        ClientValidationError,
    ),
    "put_many(deadline=nan)": (
        lambda b: b.put_many({"a": b"x"}, deadline=float("nan")),
        ClientValidationError,
    ),
    "get_many(None)": (lambda b: b.get_many(None), WrongTypeError),
    "get_many(str)": (lambda b: b.get_many("abc"), WrongTypeError),
    "get_many([None])": (lambda b: b.get_many([None]), kvstore.InvalidKeyError),
    "get_many([[1]])": (lambda b: b.get_many([[1]]), kvstore.InvalidKeyError),
    "typed.put_many(None)": (lambda b: b.typed(str).put_many(None), WrongTypeError),
    "typed.put_many(list of str)": (lambda b: b.typed(str).put_many(["abc"]), WrongTypeError),
}


@pytest.mark.parametrize("name", list(CALLS))
async def test_bad_arguments_to_bucket_calls_are_typed_errors_and_write_nothing(
    js: jetstream.JetStream, make_bucket: BucketFactory, name: str
) -> None:
    bucket = await make_bucket(key_codec=Base64KeyCodec(), encryption=RING)
    call, error = CALLS[name]
    with pytest.raises(error):
        await call(bucket)
    info = await js.stream_info(bucket.stream)
    assert info.state.messages == 0, "nothing written"


@pytest.mark.parametrize("filters", [None, 5, b"a.>"])
async def test_bad_key_filters_are_typed_errors(
    js: jetstream.JetStream, make_bucket: BucketFactory, filters: Any
) -> None:
    bucket = await make_bucket(key_codec=Base64KeyCodec())
    for call in (bucket.keys, bucket.watch, bucket.typed(str).watch):
        with pytest.raises(WrongTypeError):
            call(filters)


def test_bad_keyring_input_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(WrongTypeError):
        Keyring.from_file(None)  # type: ignore[arg-type]
    nested = tmp_path / "keys.json"
    nested.write_text("[" * 100_000)
    with pytest.raises(InvalidKeyringError):
        Keyring.from_file(nested)
    for plaintext, associated in (("not bytes", b""), (b"x", None)):
        with pytest.raises(WrongTypeError):
            RING.seal(plaintext, associated)  # type: ignore[arg-type]
    with pytest.raises(WrongTypeError):
        EncryptedKeyCodec(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("codec", [Base64KeyCodec(), PathKeyCodec(), EncryptedKeyCodec(RING)])
def test_decoding_a_stored_key_that_is_not_a_str_is_a_typed_error(codec: Any) -> None:
    with pytest.raises(WrongTypeError):
        codec.decode_key(None)


def test_a_type_msgspec_cannot_resolve_is_refused_by_typed() -> None:
    class Profile(msgspec.Struct):
        owner: Undefined  # type: ignore[name-defined]  # noqa: F821 (a typo in the user's type)

    bucket = object.__new__(kvstore.Bucket)  # typed() sends nothing
    with pytest.raises(ClientValidationError):
        bucket.typed(Profile)


@pytest.mark.parametrize("encrypted", [False, True])
async def test_decode_entry_takes_nats_py_messages_without_headers(
    js: jetstream.JetStream, make_bucket: BucketFactory, encrypted: bool
) -> None:
    bucket = await make_bucket(**({"encryption": RING} if encrypted else {}))
    subject, now = f"$KV.{bucket.name}.k", datetime.now(UTC)
    if encrypted:  # a plain value in an encrypted bucket
        with pytest.raises(jetstream.PlaintextValueError):
            bucket.decode_entry(subject, b"v", revision=1, created=now, headers=None)
    else:
        entry = bucket.decode_entry(subject, b"v", revision=1, created=now, headers=None)
        assert (entry.key, entry.value, entry.op) == ("k", b"v", kvstore.Op.PUT)
    for bad_subject, value, headers in ((None, b"v", {}), (subject, "v", {}), (subject, b"v", [])):
        with pytest.raises(WrongTypeError):
            bucket.decode_entry(bad_subject, value, revision=1, created=now, headers=headers)


class Account(msgspec.Struct):
    balance: int

    def __post_init__(self) -> None:
        assert self.balance >= 0, "balance must not be negative"


async def test_a_value_the_type_s_own_check_refuses_is_a_decode_error(
    js: jetstream.JetStream, make_bucket: BucketFactory, peer: JetStreamContext
) -> None:
    bucket = await make_bucket()
    accounts = bucket.typed(Account)
    negative = Account(5)
    negative.balance = -5  # past the check: it would never read back
    with pytest.raises(kvstore.ValueEncodeError):
        await accounts.put("neg", negative)
    await peer.publish(f"$KV.{bucket.name}.bad", b'{"balance": -5}')
    await accounts.put("good", Account(5))
    with pytest.raises(kvstore.ValueDecodeError) as refused:
        await accounts.get("bad")
    assert (refused.value.key, refused.value.revision) == ("bad", 1)
    async with accounts.watch() as watcher:  # reported, and the watch goes on
        first = await asyncio.wait_for(anext(watcher), 10)
        second = await asyncio.wait_for(anext(watcher), 10)
    assert isinstance(first.error, kvstore.ValueDecodeError) and first.key == "bad"
    assert second.value == Account(5)


class Hungry(msgspec.Struct):
    n: int

    def __post_init__(self) -> None:
        if self.n > 10:
            raise MemoryError("out of memory while building the value")


async def test_a_memory_error_while_decoding_is_not_taken_for_a_bad_value(
    js: jetstream.JetStream, make_bucket: BucketFactory
) -> None:
    bucket = await make_bucket()
    typed = bucket.typed(Hungry)
    value = Hungry(5)
    value.n = 11  # encodes; decoding it back (put's check) runs out of memory
    with pytest.raises(MemoryError):
        await typed.put("k", value)
    await bucket.put("k", b'{"n": 11}')
    with pytest.raises(MemoryError):
        await typed.get("k")


async def test_put_many_takes_pairs_as_lists(
    js: jetstream.JetStream, make_bucket: BucketFactory
) -> None:
    bucket = await make_bucket()
    rows = [["a", b"1"], ("b", b"2")]  # as a JSON or CSV reader gives them
    await bucket.put_many(rows)  # type: ignore[arg-type]
    assert {k: e.value for k, e in (await bucket.get_many(["a", "b"])).items()} == {
        "a": b"1",
        "b": b"2",
    }
    await bucket.typed(str).put_many([["c", "3"]])  # type: ignore[list-item]
    assert (await bucket.typed(str).get("c")).value == "3"


ENC = jetstream.headers.ENCRYPTION


@pytest.mark.parametrize("header", [["v1;k1"], {"v1": "k1"}], ids=["list", "dict"])
async def test_decode_entry_with_an_odd_encryption_header_raises_a_library_error(
    js: jetstream.JetStream, make_bucket: BucketFactory, header: object
) -> None:
    """decode_entry (public: for messages read elsewhere, e.g. a sourced copy) on an encrypted
    bucket: a Jetstore-Enc header value that is not a str must raise one of the library's
    errors (a str check already exists: an int gives ClientValidationError), never a raw
    exception. A list (the shape object meta headers have) raised a raw
    ``TypeError: unhashable type: 'list'`` from the opener cache lookup."""
    bucket = await make_bucket(encryption=RING)
    await bucket.put("k", b"secret")
    stored = await js.get_last_message(bucket.stream, f"$KV.{bucket.name}.k")
    with pytest.raises(jetstream.JetStreamError):
        bucket.decode_entry(
            stored.subject,
            stored.data,
            revision=stored.seq,
            created=datetime.now(UTC),
            headers={ENC: header},  # type: ignore[dict-item]
        )
