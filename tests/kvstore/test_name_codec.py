"""Key-name encryption (EncryptedKeyCodec): round trips, filter semantics, determinism, names
bound to their bucket, the format of older buckets (v1) still read and written, and names
sealed with another key, for another bucket or by someone else refused as undecodable."""

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
from tests.kvstore.test_codecs import _filter_for, _filterable_key, _matches, _user_key

RING = jetstream.Keyring({"a": bytes(range(32)), "b": bytes(32)}, primary="a")
BUCKET = "customers"
# Stored by EncryptedKeyCodec(RING) before names were bound to their bucket (format v1), for
# the key "customers.alice.email" in any bucket: such buckets must keep reading and writing it.
V1_NAME = (
    "YsZ5oh4zRDQPygOsshf_lMlvK7aabiIMgA.YRC2QLQbKg4qF2jOjCGuq-OBu0GL.kOf536lsLcf950MYnona3pCsN6aA"
)


def _codec(ring: jetstream.Keyring = RING, **options: str) -> EncryptedKeyCodec:
    """The codec as a bucket named BUCKET uses it."""
    return EncryptedKeyCodec(ring, **options).for_bucket(BUCKET)


@settings(deadline=None)  # pure and fast; no timing flakes on a loaded machine
@given(_user_key)
def test_round_trip_and_no_token_in_clear(tokens: list[str]) -> None:
    codec = _codec()
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
    codec = _codec()
    pattern = data.draw(_filter_for(tokens))
    stored_key = codec.encode_key(".".join(tokens)).split(".")
    stored_filter = codec.encode_filter(".".join(pattern))
    validate_filter(stored_filter)
    assert _matches(tokens, pattern) == _matches(stored_key, stored_filter.split("."))


def test_equal_tokens_at_other_positions_look_unrelated() -> None:
    stored = _codec().encode_key("x.x.x").split(".")
    assert len(set(stored)) == 3


def test_the_key_id_picks_the_key_and_another_key_cannot_read_the_names() -> None:
    by_a, by_b = _codec(), _codec(key_id="b")
    stored = by_a.encode_key("users.alice")
    assert by_b.encode_key("users.alice") != stored
    with pytest.raises(KeyDecodeError):
        by_b.decode_key(stored)
    ring_b_only = jetstream.Keyring({"b": bytes(32)}, primary="b")
    assert _codec(ring_b_only).decode_key(by_b.encode_key("k")) == "k"


@pytest.mark.parametrize("stored", ["plain", "users.alice", "AAAAAAAAAAAAAAAAAAAAAA", "a=b"])
def test_names_it_did_not_seal_are_undecodable(stored: str) -> None:
    with pytest.raises(KeyDecodeError):
        _codec().decode_key(stored)


def test_a_swapped_token_is_refused() -> None:
    codec = _codec()
    first, second = codec.encode_key("a.b").split(".")
    with pytest.raises(KeyDecodeError):
        codec.decode_key(f"{second}.{first}")


@pytest.mark.parametrize("key", ["", "a..b", ".a", "a.", "\ud800", 7])
def test_bad_keys_are_refused(key: object) -> None:
    with pytest.raises(InvalidKeyError):
        _codec().encode_key(key)  # type: ignore[arg-type]


def test_bad_construction_is_refused() -> None:
    with pytest.raises(jetstream.UnknownKeyIdError):
        EncryptedKeyCodec(RING, key_id="nope")
    with pytest.raises(jetstream.WrongTypeError):
        EncryptedKeyCodec(bytes(32))  # type: ignore[arg-type]
    assert "key_id='a'" in repr(EncryptedKeyCodec(RING)) and "\\x" not in repr(RING)


def test_chained_after_the_path_codec() -> None:
    codec = ChainKeyCodec(PathKeyCodec(), _codec())
    stored = codec.encode_key("/etc/hosts")
    validate_key(stored)
    assert codec.decode_key(stored) == "/etc/hosts"
    assert codec.encode_filter("/etc/>").endswith(".>")


def test_a_key_is_stored_under_unrelated_names_in_two_buckets() -> None:
    codec = EncryptedKeyCodec(RING)
    in_a, in_b = codec.for_bucket("a"), codec.for_bucket("b")
    stored_a, stored_b = in_a.encode_key("users.alice"), in_b.encode_key("users.alice")
    assert not set(stored_a.split(".")) & set(stored_b.split("."))
    assert in_b.decode_key(stored_b) == "users.alice"
    with pytest.raises(KeyDecodeError):  # a name copied from another bucket
        in_b.decode_key(stored_a)
    assert codec.for_bucket("a").encode_key("users.alice") == stored_a, "deterministic"


def test_buckets_of_the_older_format_keep_their_names() -> None:
    old = EncryptedKeyCodec(RING).for_bucket("any", version=1)
    assert old.encode_key("customers.alice.email") == V1_NAME
    assert old.decode_key(V1_NAME) == "customers.alice.email"
    assert (
        EncryptedKeyCodec(RING).for_bucket("other", version=1).encode_key("customers.alice.email")
        == V1_NAME
    ), "v1 names are the same in every bucket"


def test_a_name_of_the_other_format_is_undecodable_and_says_so() -> None:
    with pytest.raises(KeyDecodeError, match="format v1"):
        _codec().decode_key(V1_NAME)
    v2_name = _codec().encode_key("customers.alice.email")
    with pytest.raises(KeyDecodeError, match="format v2"):
        EncryptedKeyCodec(RING).for_bucket(BUCKET, version=1).decode_key(v2_name)


def test_a_codec_not_bound_to_a_bucket_is_refused() -> None:
    codec = EncryptedKeyCodec(RING)
    for use in (codec.encode_key, codec.decode_key, codec.encode_filter):
        with pytest.raises(jetstream.ClientValidationError, match="for_bucket"):
            use("k")
    with pytest.raises(jetstream.ClientValidationError):
        codec.for_bucket("a", version=3)
    with pytest.raises(jetstream.InvalidBucketNameError):
        codec.for_bucket("a.b")
    assert "bucket='a'" in repr(codec.for_bucket("a"))
