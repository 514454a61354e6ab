"""Hostile review (s10) of client-side encryption: keyring inputs. Each test asserts what a
user relies on and fails on the current code."""

from __future__ import annotations

import base64
import json
import os

import pytest

import jetstream
from jetstream import Keyring

KEY = base64.b64encode(bytes(range(100, 132))).decode()
OTHER = base64.b64encode(bytes(range(200, 232))).decode()


def _from_env(monkeypatch: pytest.MonkeyPatch, text: str) -> Keyring:
    monkeypatch.setenv("S10_KEYRING", text)
    return Keyring.from_env("S10_KEYRING")


@pytest.mark.parametrize(
    "document",
    [
        {"primary": "k1", "keys": {KEY: "k1"}},  # "keys" written the other way round
        {"primary": KEY, "keys": {"k1": KEY}},  # the key pasted as the primary
        {"primary": "k1", "keys": {KEY: KEY}},  # the key pasted as its own id
    ],
    ids=["keys-inverted", "key-as-primary", "key-as-id"],
)
def test_a_keyring_error_never_shows_key_material(
    monkeypatch: pytest.MonkeyPatch, document: dict[str, object]
) -> None:
    """docs/CODECS.md: 'A keyring's repr, its errors and the bucket's repr show key ids only,
    never key material'; _keyring.py: 'Error messages name the field, never its value: the
    value may be a key.' A key file with two fields mixed up puts the whole base64 key into
    InvalidKeyringError's message (and so into logs)."""
    with pytest.raises(jetstream.InvalidKeyringError) as raised:
        _from_env(monkeypatch, json.dumps(document))
    assert KEY not in str(raised.value)
    assert KEY.rstrip("=") not in str(raised.value)


def test_a_key_file_with_a_key_id_twice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """'Anything else (...) raises InvalidKeyringError': a key file naming one key id twice
    (a bad merge of two key files) silently keeps the last key, so every value sealed with
    the first one later fails as 'wrong key' (DecryptionError) with no hint at the file."""
    text = f'{{"primary": "k1", "keys": {{"k1": "{KEY}", "k1": "{OTHER}"}}}}'
    with pytest.raises(jetstream.InvalidKeyringError):
        _from_env(monkeypatch, text)


def test_a_key_file_with_two_primaries_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    text = f'{{"primary": "a", "primary": "b", "keys": {{"a": "{KEY}", "b": "{OTHER}"}}}}'
    with pytest.raises(jetstream.InvalidKeyringError):
        _from_env(monkeypatch, text)


def test_a_key_file_path_with_a_nul_is_a_typed_error() -> None:
    """from_file: 'InvalidKeyringError: the file cannot be read'; a path with a NUL raised a
    raw ValueError ('embedded null byte')."""
    with pytest.raises(jetstream.JetStreamError):
        Keyring.from_file("/run/secrets/keys\x00.json")


@pytest.mark.parametrize("var", [123, None])
def test_from_env_with_a_variable_name_that_is_not_a_str_is_a_typed_error(var: object) -> None:
    """from_file checks its argument (WrongTypeError); from_env raised a raw TypeError."""
    with pytest.raises(jetstream.JetStreamError):
        Keyring.from_env(var)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_keyring_open_takes_the_bytes_like_associated_data_seal_takes(kind: type) -> None:
    """Keyring.seal accepts bytes-like associated data and Keyring.open documents
    'ClientValidationError: ... associated data that is not bytes-like', yet open refused a
    bytearray or memoryview: what seal sealed, open could not open with the same argument."""
    ring = Keyring({"k1": os.urandom(32)}, primary="k1")
    associated = kind(b"bucket/key")
    header, payload = ring.seal(b"secret", associated)
    assert ring.open(header, payload, associated) == b"secret"
