"""Hostile review of session 10's keyring changes: key material must not reach an error
message, whichever argument the key was passed in by mistake."""

from __future__ import annotations

import base64
import json

import pytest

import jetstream


def _key_file_text() -> tuple[str, str]:
    key = base64.b64encode(jetstream.Keyring.new_key()).decode()
    return json.dumps({"primary": "k1", "keys": {"k1": key}}), key


def test_from_env_given_the_key_file_text_does_not_show_the_key() -> None:
    """``Keyring.from_env(os.environ["JETSTORE_KEYRING"])`` (the value for the name)."""
    text, key = _key_file_text()
    with pytest.raises(jetstream.InvalidKeyringError) as caught:
        jetstream.Keyring.from_env(text)
    assert key not in str(caught.value)


def test_from_file_given_the_key_file_text_does_not_show_the_key() -> None:
    text, key = _key_file_text()
    with pytest.raises(jetstream.InvalidKeyringError) as caught:
        jetstream.Keyring.from_file(text)
    assert key not in str(caught.value)


def test_derive_with_a_key_as_key_id_does_not_show_the_key() -> None:
    raw = jetstream.Keyring.new_key()
    ring = jetstream.Keyring({"k1": raw}, primary="k1")
    text = base64.b64encode(raw).decode()
    with pytest.raises(jetstream.UnknownKeyIdError) as caught:
        ring.derive("hmac", 32, key_id=text)
    assert text not in str(caught.value)
    with pytest.raises(jetstream.UnknownKeyIdError) as caught:
        ring.derive("hmac", 32, key_id=raw)  # type: ignore[arg-type]
    assert repr(raw) not in str(caught.value)
