"""The encryption envelope: AES-256-GCM over one value, pure functions (no I/O, no keyring).

Format ``v1`` (docs/CODECS.md, "Encryption"):

- header ``Jetstore-Enc: v1;<key id>`` (:data:`jetstream.headers.ENCRYPTION`);
- payload ``nonce (12 bytes, random) || ciphertext || GCM tag (16 bytes)``;
- associated data ``"jetstore-enc" || lp("v1") || lp(key id) || caller's parts``, where
  ``lp(s)`` is the 4-byte big-endian length of ``s``'s UTF-8 bytes followed by them. The caller
  binds the value to where it lives (KV: ``"kv"``, bucket, stored key), so a payload copied to
  another key, bucket or key id fails authentication. Length prefixes keep the parts apart
  (``("ab", "c")`` and ``("a", "bc")`` are different data).
"""

from __future__ import annotations

import functools
import os
import re
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .._errors import ClientValidationError, DecryptionError

__all__ = [
    "KEY_ID_PATTERN",
    "KEY_SIZE",
    "NONCE_SIZE",
    "OVERHEAD",
    "TAG_SIZE",
    "VERSION",
    "associated_data",
    "format_header",
    "key_prefix",
    "open_bound",
    "parse_header",
    "seal_payload",
]

VERSION: Final = "v1"
KEY_SIZE: Final = 32  # AES-256
NONCE_SIZE: Final = 12  # 96 bits: GCM's native nonce size, random per message
TAG_SIZE: Final = 16
OVERHEAD: Final = NONCE_SIZE + TAG_SIZE
"""Bytes a sealed payload has beyond its plaintext."""
KEY_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9._-]{1,64}")
"""A key id: a short token safe in a header value (no ``;``, spaces or control characters)."""
_DOMAIN: Final = b"jetstore-enc"


def format_header(key_id: str) -> str:
    """The ``Jetstore-Enc`` header value of a payload sealed with ``key_id``."""
    return f"{VERSION};{key_id}"


def parse_header(value: str) -> str:
    """The key id a ``Jetstore-Enc`` header value names.

    Raises:
        DecryptionError: not ``v1;<key id>`` (another format version, or a mangled header).
        ClientValidationError: not a str.
    """
    if not isinstance(value, str):
        raise ClientValidationError(f"a Jetstore-Enc header is a str, not {type(value).__name__}")
    version, sep, key_id = value.partition(";")
    if version != VERSION or not sep:
        raise DecryptionError(f"unknown encryption format {value[:40]!r} (expected {VERSION})")
    if not KEY_ID_PATTERN.fullmatch(key_id):
        raise DecryptionError(f"encryption header names an invalid key id {key_id[:70]!r}")
    return key_id


def associated_data(*parts: str) -> bytes:
    """Length-prefixed UTF-8 parts: what a payload is bound to besides its key."""
    return b"".join(map(_length_prefixed, parts))


def _length_prefixed(part: str) -> bytes:
    raw = part.encode("utf-8", "surrogatepass")
    return len(raw).to_bytes(4, "big") + raw


@functools.lru_cache(maxsize=256)
def key_prefix(key_id: str) -> bytes:
    """The start of the associated data every payload sealed with ``key_id`` authenticates
    (domain, format version, key id); the caller's parts follow it. The same for every value
    a key seals: computed once (it is on every write's path)."""
    return _DOMAIN + associated_data(VERSION, key_id)


def _full_ad(key_id: str, ad: bytes) -> bytes:
    return key_prefix(key_id) + ad


def seal_payload(
    cipher: AESGCM, key_id: str, plaintext: bytes, ad: bytes, nonce: bytes | None = None
) -> bytes:
    """``nonce || ciphertext || tag`` of ``plaintext`` under ``cipher`` (the key ``key_id``);
    the nonce is random unless given (it must never repeat under one key)."""
    if nonce is None:
        nonce = os.urandom(NONCE_SIZE)
    return nonce + cipher.encrypt(nonce, plaintext, _full_ad(key_id, ad))


def open_bound(cipher: AESGCM, key_id: str, payload: bytes, full_ad: bytes) -> bytes:
    """The plaintext of a sealed payload; ``full_ad`` is the whole associated data
    (``key_prefix(key_id)`` and the caller's parts, built once per prefix on hot paths).

    Raises:
        DecryptionError: too short, or authentication failed (wrong key, changed bytes, other
            associated data: a value moved to another key or bucket).
        ClientValidationError: ``payload`` or ``full_ad`` is not bytes-like.
    """
    if not isinstance(payload, bytes | bytearray | memoryview):
        raise ClientValidationError(f"a payload is bytes-like, not {type(payload).__name__}")
    try:
        if len(payload) < OVERHEAD:
            raise DecryptionError(
                f"encrypted payload of {len(payload)} bytes is shorter than its {OVERHEAD}-byte "
                "nonce and tag",
                key_id=key_id,
            )
        # A view, not a slice: an object chunk's ciphertext is not copied before decryption.
        nonce, sealed = payload[:NONCE_SIZE], memoryview(payload)[NONCE_SIZE:]
        return cipher.decrypt(nonce, sealed, full_ad)
    except InvalidTag:
        raise DecryptionError(
            f"authentication failed with key {key_id!r}: wrong key, or the value was changed "
            "or moved to another key or bucket",
            key_id=key_id,
        ) from None
    except TypeError as exc:  # associated data of a caller's that is not bytes
        raise ClientValidationError(f"associated data must be bytes-like: {exc}") from None
