"""Keyring validation and loading, and the pure encryption envelope (format v1)."""

from __future__ import annotations

import base64
import copy
import json
import os
import pickle
import struct
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

import jetstream
from jetstream import DecryptionError, InvalidKeyringError, Keyring, UnknownKeyIdError
from jetstream._crypto.envelope import (
    OVERHEAD,
    associated_data,
    format_header,
    parse_header,
)

K1 = bytes(range(32))
K2 = bytes(range(100, 132))


def _ring() -> Keyring:
    return Keyring({"k1": K1, "k2": K2}, primary="k2")


def _lp(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">I", len(raw)) + raw


# -- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "primary"),
    [
        ({}, "k1"),
        ([("k1", K1)], "k1"),
        ({"k1": K1[:31]}, "k1"),
        ({"k1": K1 + b"x"}, "k1"),
        ({"k1": K1.hex()}, "k1"),
        ({"k1": None}, "k1"),
        ({"": K1}, ""),
        ({"a;b": K1}, "a;b"),
        ({"a b": K1}, "a b"),
        ({"é": K1}, "é"),
        ({"k" * 65: K1}, "k" * 65),
        ({1: K1}, 1),
        ({"k1": K1}, "k2"),
        ({"k1": K1}, None),
    ],
)
def test_bad_keyrings_raise_a_typed_error(keys: object, primary: object) -> None:
    with pytest.raises(InvalidKeyringError) as raised:
        Keyring(keys, primary=primary)  # type: ignore[arg-type]
    assert isinstance(raised.value, jetstream.ClientValidationError)
    assert isinstance(raised.value, ValueError)


def test_a_valid_keyring_names_its_keys_and_primary() -> None:
    ring = Keyring({"2026-11": K2, "2026.01_old": bytearray(K1)}, primary="2026-11")
    assert ring.primary == "2026-11"
    assert ring.key_ids == ("2026-11", "2026.01_old")
    assert "2026.01_old" in ring and "nope" not in ring
    assert len(Keyring.new_key()) == 32 and Keyring.new_key() != Keyring.new_key()


def test_reprs_and_errors_never_show_key_material() -> None:
    ring = _ring()
    secrets = [K1, K2]
    forms = [K1.hex(), K2.hex(), base64.b64encode(K1).decode(), repr(K1)[2:-1], repr(K2)[2:-1]]
    for text in (repr(ring), str(ring), f"{ring}", repr([ring])):
        assert "Keyring(key_ids=['k1', 'k2'], primary='k2')" in text
        for form in forms:
            assert form not in text
    with pytest.raises(TypeError):
        pickle.dumps(ring)  # a pickle would carry the keys somewhere
    with pytest.raises(TypeError):
        copy.deepcopy(ring)
    # an error about a key file names fields, never values
    bad = {"primary": "k9", "keys": {"k1": base64.b64encode(K1).decode()}}
    with pytest.raises(InvalidKeyringError) as raised:
        Keyring._from_json(json.dumps(bad), "test")
    assert base64.b64encode(K1).decode() not in str(raised.value)
    assert all(secret.hex() not in str(raised.value) for secret in secrets)


# -- loading ----------------------------------------------------------------------------------


def _document(primary: str = "k2", **keys: bytes) -> str:
    keys = keys or {"k1": K1, "k2": K2}
    encoded = {key_id: base64.b64encode(key).decode() for key_id, key in keys.items()}
    return json.dumps({"primary": primary, "keys": encoded})


def test_from_file_and_from_env_read_the_documented_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "keys.json"
    path.write_text(_document())
    for ring in (Keyring.from_file(path), Keyring.from_file(str(path))):
        assert (ring.primary, ring.key_ids) == ("k2", ("k1", "k2"))
        header, payload = ring.seal(b"x", b"")
        assert _ring().open(header, payload, b"") == b"x"  # same key material
    monkeypatch.setenv("MY_KEYS", _document(primary="k1"))
    assert Keyring.from_env("MY_KEYS").primary == "k1"
    monkeypatch.setenv("JETSTORE_KEYRING", _document())
    assert Keyring.from_env().primary == "k2"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[]",
        '{"primary": "k1"}',
        '{"primary": "k1", "keys": {}, "extra": 1}',
        '{"primary": "k1", "keys": []}',
        '{"primary": "k1", "keys": {"k1": 5}}',
        '{"primary": "k1", "keys": {"k1": "not base64!"}}',
        '{"primary": "k1", "keys": {"k1": "AAAA"}}',  # 3 bytes
        _document(primary="k3"),
    ],
)
def test_bad_key_files_raise_a_typed_error(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "keys.json"
    path.write_text(text)
    with pytest.raises(InvalidKeyringError):
        Keyring.from_file(path)
    monkeypatch.setenv("BAD_KEYS", text)
    with pytest.raises(InvalidKeyringError):
        Keyring.from_env("BAD_KEYS")


def test_missing_sources_raise_a_typed_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(InvalidKeyringError, match="cannot read key file"):
        Keyring.from_file(tmp_path / "absent.json")
    (tmp_path / "binary").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InvalidKeyringError):
        Keyring.from_file(tmp_path / "binary")
    monkeypatch.delenv("NO_SUCH_KEYS", raising=False)
    with pytest.raises(InvalidKeyringError, match="NO_SUCH_KEYS"):
        Keyring.from_env("NO_SUCH_KEYS")


# -- the envelope -----------------------------------------------------------------------------


def test_the_envelope_is_aes_gcm_with_the_documented_layout() -> None:
    """Decrypted by hand from the format in docs/CODECS.md: nonce || ciphertext || tag, with
    associated data "jetstore-enc" || lp("v1") || lp(key id) || the caller's parts."""
    ad = associated_data("kv", "orders", "alice.city")
    assert ad == _lp("kv") + _lp("orders") + _lp("alice.city")
    header, payload = _ring().seal(b"Paris", ad)
    assert header == "v1;k2" == format_header("k2")
    assert len(payload) == len(b"Paris") + OVERHEAD == 5 + 12 + 16
    full_ad = b"jetstore-enc" + _lp("v1") + _lp("k2") + ad
    assert AESGCM(K2).decrypt(payload[:12], payload[12:], full_ad) == b"Paris"


def test_every_seal_uses_a_fresh_nonce() -> None:
    ring = _ring()
    payloads = {ring.seal(b"same", b"ad")[1] for _ in range(50)}
    assert len(payloads) == 50
    assert len({payload[:12] for payload in payloads}) == 50


def test_any_changed_byte_or_binding_fails_to_open() -> None:
    ring = _ring()
    ad = associated_data("kv", "b", "k")
    header, payload = ring.seal(b"secret value", ad)
    assert ring.open(header, payload, ad) == b"secret value"
    for index in range(len(payload)):  # nonce, ciphertext and tag bytes alike
        flipped = bytearray(payload)
        flipped[index] ^= 0x01
        with pytest.raises(DecryptionError):
            ring.open(header, bytes(flipped), ad)
    for other in (associated_data("kv", "b", "k2"), associated_data("kv", "b2", "k"), b""):
        with pytest.raises(DecryptionError):
            ring.open(header, payload, other)  # moved to another key or bucket
    with pytest.raises(DecryptionError):
        ring.open("v1;k1", payload, ad)  # the header names another key of the ring
    for short in (b"", payload[: OVERHEAD - 1]):
        with pytest.raises(DecryptionError):
            ring.open(header, short, ad)
    wrong = Keyring({"k2": K1}, primary="k2")  # same key id, other key
    with pytest.raises(DecryptionError) as raised:
        wrong.open(header, payload, ad)
    assert raised.value.key_id == "k2" and not isinstance(raised.value, UnknownKeyIdError)


def test_an_unknown_key_id_or_format_is_refused() -> None:
    ring = _ring()
    ad = associated_data("x")
    header, payload = ring.seal(b"v", ad)
    only_k1 = Keyring({"k1": K1}, primary="k1")
    with pytest.raises(UnknownKeyIdError) as raised:
        only_k1.open(header, payload, ad)
    assert raised.value.key_id == "k2"
    assert isinstance(raised.value, DecryptionError)
    for bad in ("v2;k2", "v1", "v1;", "k2", "V1;k2", "v1;k 2", "v1;k2;x", ""):
        with pytest.raises(DecryptionError):
            parse_header(bad)
        with pytest.raises(DecryptionError):
            ring.open(bad, payload, ad)
    assert parse_header("v1;2026.11-a_b") == "2026.11-a_b"
    assert ring.key_id_of({"Jetstore-Enc": "v1;k1"}) == "k1"
    assert ring.key_id_of({}) is None


def test_associated_data_parts_cannot_run_into_each_other() -> None:
    assert associated_data("ab", "c") != associated_data("a", "bc")
    assert associated_data("a.b") != associated_data("a", "b")
    assert associated_data() == b""


def test_a_sealer_numbers_its_nonces_from_one_random_base() -> None:
    ring = _ring()
    ad = associated_data("obj", "s", "nuid", "0", "more")
    first, second = ring.sealer(), ring.sealer()
    payloads = [first.seal(b"chunk", ad) for _ in range(300)]
    nonces = [int.from_bytes(payload[:12], "big") for _, payload in payloads]
    assert len(set(nonces)) == 300  # unique within the sealer: base XOR 0, 1, 2, ...
    assert [nonce ^ nonces[0] for nonce in nonces] == list(range(300))
    assert second.seal(b"chunk", ad)[1][:12] != payloads[0][1][:12]  # another random base
    for header, payload in payloads:
        assert header == "v1;k2" and ring.open(header, payload, ad) == b"chunk"
    assert "k2" in repr(first) and K2.hex() not in repr(first)


def test_a_sealer_shared_by_threads_never_repeats_a_nonce() -> None:
    """KV buckets keep one sealer per handle; a handle used from several threads (Spark
    tasks, run_sync) must still never seal two values under one nonce."""
    import concurrent.futures

    sealer = Keyring({"k": bytes(32)}, primary="k").sealer()

    def seal_many(_: int) -> list[bytes]:
        return [sealer.seal(b"x", b"ad")[1][:12] for _ in range(2000)]

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        nonces = [n for batch in pool.map(seal_many, range(8)) for n in batch]
    assert len(set(nonces)) == len(nonces) == 16_000


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
