"""Key-name encryption (EncryptedKeyCodec): round trips, filter semantics, determinism, and
names sealed with another key or by someone else refused as undecodable."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jetstream
from kvstore import (
    ChainKeyCodec,
    EncryptedKeyCodec,
    InvalidKeyError,
    KeyDecodeError,
    PathKeyCodec,
    validate_filter,
    validate_key,
)
from tests.unit.test_codecs import _filter_for, _filterable_key, _matches, _user_key

RING = jetstream.Keyring({"a": bytes(range(32)), "b": bytes(32)}, primary="a")


@settings(deadline=None)  # pure and fast; no timing flakes on a loaded machine
@given(_user_key)
def test_round_trip_and_no_token_in_clear(tokens: list[str]) -> None:
    codec = EncryptedKeyCodec(RING)
    key = ".".join(tokens)
    stored = codec.encode_key(key)
    validate_key(stored)
    assert codec.decode_key(stored) == key
    assert codec.encode_key(key) == stored, "deterministic: get and CAS find the key again"
    assert len(stored.split(".")) == len(tokens)
    assert not set(tokens) & set(stored.split("."))


@settings(deadline=None)
@given(st.data(), _filterable_key)
def test_filter_semantics(data: st.DataObject, tokens: list[str]) -> None:
    codec = EncryptedKeyCodec(RING)
    pattern = data.draw(_filter_for(tokens))
    stored_key = codec.encode_key(".".join(tokens)).split(".")
    stored_filter = codec.encode_filter(".".join(pattern))
    validate_filter(stored_filter)
    assert _matches(tokens, pattern) == _matches(stored_key, stored_filter.split("."))


def test_equal_tokens_at_other_positions_look_unrelated() -> None:
    stored = EncryptedKeyCodec(RING).encode_key("x.x.x").split(".")
    assert len(set(stored)) == 3


def test_the_key_id_picks_the_key_and_another_key_cannot_read_the_names() -> None:
    by_a, by_b = EncryptedKeyCodec(RING), EncryptedKeyCodec(RING, key_id="b")
    stored = by_a.encode_key("users.alice")
    assert by_b.encode_key("users.alice") != stored
    with pytest.raises(KeyDecodeError):
        by_b.decode_key(stored)
    ring_b_only = jetstream.Keyring({"b": bytes(32)}, primary="b")
    assert EncryptedKeyCodec(ring_b_only).decode_key(by_b.encode_key("k")) == "k"


@pytest.mark.parametrize("stored", ["plain", "users.alice", "AAAAAAAAAAAAAAAAAAAAAA", "a=b"])
def test_names_it_did_not_seal_are_undecodable(stored: str) -> None:
    with pytest.raises(KeyDecodeError):
        EncryptedKeyCodec(RING).decode_key(stored)


def test_a_swapped_token_is_refused() -> None:
    codec = EncryptedKeyCodec(RING)
    first, second = codec.encode_key("a.b").split(".")
    with pytest.raises(KeyDecodeError):
        codec.decode_key(f"{second}.{first}")


@pytest.mark.parametrize("key", ["", "a..b", ".a", "a.", "\ud800", 7])
def test_bad_keys_are_refused(key: object) -> None:
    with pytest.raises(InvalidKeyError):
        EncryptedKeyCodec(RING).encode_key(key)  # type: ignore[arg-type]


def test_bad_construction_is_refused() -> None:
    with pytest.raises(jetstream.UnknownKeyIdError):
        EncryptedKeyCodec(RING, key_id="nope")
    with pytest.raises(jetstream.WrongTypeError):
        EncryptedKeyCodec(bytes(32))  # type: ignore[arg-type]
    assert "key_id='a'" in repr(EncryptedKeyCodec(RING)) and "\\x" not in repr(RING)


def test_chained_after_the_path_codec() -> None:
    codec = ChainKeyCodec(PathKeyCodec(), EncryptedKeyCodec(RING))
    stored = codec.encode_key("/etc/hosts")
    validate_key(stored)
    assert codec.decode_key(stored) == "/etc/hosts"
    assert codec.encode_filter("/etc/>").endswith(".>")
