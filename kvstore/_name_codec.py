"""Key-name encryption: a key codec that stores every token of a key encrypted.

Each token is sealed with AES-SIV (RFC 5297), which is deterministic: the same token at the
same position always has the same stored form, so ``get``, compare-and-set and token-wise
filters (``orders.*.shipped``) keep working without the server seeing the names. The SIV
key is derived from one key of a :class:`jetstream.Keyring` (HKDF, its own purpose), and
the token's position is its associated data, so equal tokens at different positions look
unrelated.

What it hides: the text of every token. What it leaks: the number of tokens, each token's
length (the stored token is 16 bytes longer, in base64url), which keys share a token at the
same position, and everything a plain bucket leaks (sizes, timing, revision counts).
"""

from __future__ import annotations

import base64
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

from jetstream import Keyring, WrongTypeError

from ._codecs import _WILDCARDS, _tokens, _unb64_bytes, checked_stored
from ._errors import InvalidKeyError, KeyDecodeError

__all__ = ["EncryptedKeyCodec"]

_PURPOSE: Final = "kv key names v1 (AES-SIV)"
_SIV_KEY_SIZE: Final = 64  # AES-256-SIV


class EncryptedKeyCodec:
    """Stores each token of a key encrypted (AES-256-SIV, deterministic), base64url-encoded.

    ``EncryptedKeyCodec(keyring)`` uses the keyring's primary key; pass ``key_id=`` to pin
    one (the stored names carry no key id, so a bucket's names stay readable only with the
    key that wrote them: rotating it means rewriting the keys, which ``rekey()`` does not
    do). Filters keep ``*``/``>`` and encrypt the other tokens at their positions. Chain it
    after another codec (``ChainKeyCodec(PathKeyCodec(), EncryptedKeyCodec(ring))``) for
    keys that are not valid subjects. The module docs say what it hides and what it leaks.

    Raises:
        jetstream.UnknownKeyIdError: ``key_id`` is not in the keyring.
        TypeError: ``keyring`` is not a :class:`jetstream.Keyring`.
    """

    __slots__ = ("_key_id", "_siv")

    def __init__(self, keyring: Keyring, *, key_id: str | None = None) -> None:
        if not isinstance(keyring, Keyring):
            raise WrongTypeError(
                f"keyring must be a jetstream.Keyring, not {type(keyring).__name__}"
            )
        self._key_id = keyring.primary if key_id is None else key_id
        self._siv = AESSIV(keyring.derive(_PURPOSE, _SIV_KEY_SIZE, key_id=self._key_id))

    def encode_key(self, key: str) -> str:
        """The stored key for ``key``: every token encrypted.

        Raises:
            InvalidKeyError: ``key`` is not a str, has an empty token, or is not encodable
                as UTF-8.
        """
        return ".".join(self._seal(token, i, key) for i, token in enumerate(_tokens(key)))

    def decode_key(self, stored: str) -> str:
        """The user key ``stored`` stands for.

        Raises:
            KeyDecodeError: a token is not base64url, or was not sealed by this codec's key
                at its position (another key, another client, or tampered).
            WrongTypeError: ``stored`` is not a str.
        """
        tokens = checked_stored(stored).split(".")
        return ".".join(self._open(token, i, stored) for i, token in enumerate(tokens))

    def encode_filter(self, pattern: str) -> str:
        """The stored filter for ``pattern``: ``*``/``>`` tokens kept, others encrypted.

        Raises:
            InvalidKeyError: as :meth:`encode_key`.
        """
        return ".".join(
            token if token in _WILDCARDS else self._seal(token, i, pattern)
            for i, token in enumerate(_tokens(pattern))
        )

    def __repr__(self) -> str:
        return f"EncryptedKeyCodec(key_id={self._key_id!r})"

    def _seal(self, token: str, position: int, key: str) -> str:
        try:
            raw = token.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidKeyError(
                f"invalid key {key!r}: not encodable as UTF-8 ({exc.reason})"
            ) from None
        sealed = self._siv.encrypt(raw, [_position(position)])
        return base64.urlsafe_b64encode(sealed).rstrip(b"=").decode("ascii")

    def _open(self, token: str, position: int, stored: str) -> str:
        sealed = _unb64_bytes(token, stored)
        try:
            raw = self._siv.decrypt(sealed, [_position(position)])
        except InvalidTag:
            raise KeyDecodeError(
                stored, f"token {position} was not sealed with key {self._key_id!r}"
            ) from None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise KeyDecodeError(stored, f"token {position} is not UTF-8 text") from None


def _position(position: int) -> bytes:
    return position.to_bytes(4, "big")
