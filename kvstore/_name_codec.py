"""Key-name encryption: a key codec that stores every token of a key encrypted.

Each token is sealed with AES-SIV (RFC 5297), which is deterministic: the same token at the
same position in the same bucket always has the same stored form, so ``get``,
compare-and-set and token-wise filters (``orders.*.shipped``) keep working without the server
seeing the names. The SIV key is derived from one key of a :class:`jetstream.Keyring` (HKDF,
its own purpose); the associated data binds each token to its bucket and position, so equal
tokens at different positions, or in another bucket sharing the ring, look unrelated.

Formats (docs/CODECS.md, "Key-name encryption"): ``v2`` (associated data: a format label, the
bucket name, the position) in every bucket :func:`kvstore.create_bucket` makes, which records
it in the stream's metadata; ``v1`` (the position alone: a key has the same stored name in
every bucket) in buckets without that record, made earlier or by other clients, so that
their names keep working. A bucket uses one format for all its names: :func:`bind_key_codec`
binds the codec when the bucket is opened.

What it hides: the text of every token. What it leaks: the number of tokens, each token's
length (the stored token is 16 bytes longer, in base64url), which keys share a token at the
same position, and everything a plain bucket leaks (sizes, timing, revision counts).
"""

from __future__ import annotations

import base64
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

from jetstream import ClientValidationError, JetStreamError, Keyring, WrongTypeError
from jetstream._protocol.bucket_config import validate_bucket_name

from ._codecs import _WILDCARDS, ChainKeyCodec, KeyCodec, _tokens, _unb64_bytes, checked_stored
from ._errors import InvalidKeyError, KeyDecodeError

__all__ = ["NAME_FORMATS", "NEW_NAME_FORMAT", "EncryptedKeyCodec", "bind_key_codec"]

_PURPOSE: Final = "kv key names v1 (AES-SIV)"  # the key derivation, the same in every format
_SIV_KEY_SIZE: Final = 64  # AES-256-SIV
NAME_FORMATS: Final = ("v1", "v2")
"""The stored-name formats this version reads and writes."""
NEW_NAME_FORMAT: Final = "v2"
"""The format of the buckets ``create_bucket`` makes, recorded in their stream's metadata."""
_UNRECORDED_FORMAT: Final = "v1"  # a bucket without a record: made earlier, or by a peer
_V2_LABEL: Final = b"jetstore kv names v2"


class EncryptedKeyCodec:
    """Stores each token of a key encrypted (AES-256-SIV, deterministic), base64url-encoded,
    bound to the bucket it is stored in.

    ``EncryptedKeyCodec(keyring)`` uses the keyring's primary key; pass ``key_id=`` to pin
    one (the stored names carry no key id, so a bucket's names stay readable only with the
    key that wrote them: rotating it means rewriting the keys, which ``rekey()`` does not
    do). Give it to :func:`kvstore.open_bucket` / :func:`kvstore.create_bucket`, which bind
    it to the bucket (in the bucket's name format); :meth:`for_bucket` does so by hand.
    Filters keep ``*``/``>`` and encrypt the other tokens at their positions. Chain it
    after another codec (``ChainKeyCodec(PathKeyCodec(), EncryptedKeyCodec(ring))``) for
    keys that are not valid subjects. The module docs say what it hides and what it leaks.

    Raises:
        jetstream.UnknownKeyIdError: ``key_id`` is not in the keyring.
        WrongTypeError: ``keyring`` is not a :class:`jetstream.Keyring`.
    """

    __slots__ = ("_bound", "_bucket", "_key_id", "_siv", "_version")

    def __init__(self, keyring: Keyring, *, key_id: str | None = None) -> None:
        if not isinstance(keyring, Keyring):
            raise WrongTypeError(
                f"keyring must be a jetstream.Keyring, not {type(keyring).__name__}"
            )
        self._key_id = keyring.primary if key_id is None else key_id
        self._siv = AESSIV(keyring.derive(_PURPOSE, _SIV_KEY_SIZE, key_id=self._key_id))
        self._bucket: str | None = None  # and _version 0: not bound (refused)
        self._version = 0
        self._bound: tuple[bytes, ...] = ()  # the associated data before the position

    def for_bucket(self, bucket: str, *, version: int = 2) -> EncryptedKeyCodec:
        """This codec (same key) as the bucket ``bucket`` uses it: ``version=2`` binds the
        names to the bucket (buckets made by :func:`kvstore.create_bucket`), ``version=1`` is
        the format of buckets without a recorded name format (the same names in every
        bucket). ``open_bucket``/``create_bucket`` call it with the bucket's own format.

        Raises:
            InvalidBucketNameError: ``bucket`` is not a valid bucket name.
            ClientValidationError: ``version`` is not 1 or 2.
        """
        validate_bucket_name(bucket)
        if version not in (1, 2) or isinstance(version, bool):
            raise ClientValidationError(f"name format version must be 1 or 2, not {version!r}")
        bound = object.__new__(EncryptedKeyCodec)
        bound._key_id, bound._siv = self._key_id, self._siv
        bound._bucket, bound._version = bucket, version
        bound._bound = _associated(version, bucket)
        return bound

    def encode_key(self, key: str) -> str:
        """The stored key for ``key``: every token encrypted.

        Raises:
            InvalidKeyError: ``key`` is not a str, has an empty token, or is not encodable
                as UTF-8.
            ClientValidationError: the codec is not bound to a bucket (:meth:`for_bucket`).
        """
        tokens = _tokens(key)
        self._check_bound()
        return ".".join(self._seal(token, i, key) for i, token in enumerate(tokens))

    def decode_key(self, stored: str) -> str:
        """The user key ``stored`` stands for.

        Raises:
            KeyDecodeError: a token is not base64url, or was not sealed by this codec's key
                for this bucket at its position (another key, bucket or format, another
                client, or tampered).
            WrongTypeError: ``stored`` is not a str.
            ClientValidationError: the codec is not bound to a bucket (:meth:`for_bucket`).
        """
        tokens = checked_stored(stored).split(".")
        self._check_bound()
        return ".".join(self._open(token, i, stored) for i, token in enumerate(tokens))

    def encode_filter(self, pattern: str) -> str:
        """The stored filter for ``pattern``: ``*``/``>`` tokens kept, others encrypted.

        Raises:
            InvalidKeyError, ClientValidationError: as :meth:`encode_key`.
        """
        tokens = _tokens(pattern)
        self._check_bound()
        return ".".join(
            token if token in _WILDCARDS else self._seal(token, i, pattern)
            for i, token in enumerate(tokens)
        )

    def __repr__(self) -> str:
        if self._bucket is None:
            return f"EncryptedKeyCodec(key_id={self._key_id!r})"
        return (
            f"EncryptedKeyCodec(key_id={self._key_id!r}, bucket={self._bucket!r}, "
            f"format='v{self._version}')"
        )

    def _check_bound(self) -> None:
        if self._bucket is None:
            raise ClientValidationError(
                f"{self!r} is not bound to a bucket: stored names depend on the bucket, so "
                "give it to open_bucket/create_bucket, or use codec.for_bucket(name)"
            )

    def _seal(self, token: str, position: int, key: str) -> str:
        try:
            raw = token.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidKeyError(
                f"invalid key {key!r}: not encodable as UTF-8 ({exc.reason})"
            ) from None
        sealed = self._siv.encrypt(raw, [*self._bound, _position(position)])
        return base64.urlsafe_b64encode(sealed).rstrip(b"=").decode("ascii")

    def _open(self, token: str, position: int, stored: str) -> str:
        sealed = _unb64_bytes(token, stored)
        try:
            raw = self._siv.decrypt(sealed, [*self._bound, _position(position)])
        except InvalidTag:
            raise KeyDecodeError(stored, self._not_ours(sealed, position)) from None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise KeyDecodeError(stored, f"token {position} is not UTF-8 text") from None

    def _not_ours(self, sealed: bytes, position: int) -> str:
        """Why a token does not open. A name of the other format is told apart: it means a
        writer (an older jetstore) that does not know this bucket's format."""
        assert self._bucket is not None
        other = 1 if self._version == 2 else 2
        try:
            self._siv.decrypt(sealed, [*_associated(other, self._bucket), _position(position)])
        except InvalidTag:
            return (
                f"token {position} was not sealed with key {self._key_id!r} for bucket "
                f"{self._bucket!r}"
            )
        return (
            f"token {position} was sealed in name format v{other}; bucket {self._bucket!r} "
            f"uses format v{self._version} (see docs/CODECS.md, key-name formats)"
        )


def bind_key_codec(codec: KeyCodec, bucket: str, name_format: str | None) -> KeyCodec:
    """``codec`` as the bucket ``bucket`` uses it: every :class:`EncryptedKeyCodec` in it
    (itself, or inside a :class:`ChainKeyCodec`) bound to the bucket in ``name_format``, the
    bucket's recorded key-name format (None, no record: v1); other codecs are returned as
    they are.

    Raises:
        JetStreamError: ``codec`` seals names and ``name_format`` is one this version does
            not know (a bucket made by a newer jetstore).
    """
    if isinstance(codec, EncryptedKeyCodec):
        if name_format is None:
            name_format = _UNRECORDED_FORMAT
        if name_format not in NAME_FORMATS:
            raise JetStreamError(
                f"bucket {bucket!r} stores sealed key names in format {name_format!r}, which "
                f"this version of jetstore does not know ({', '.join(NAME_FORMATS)}): upgrade"
            )
        return codec.for_bucket(bucket, version=int(name_format[1:]))
    if isinstance(codec, ChainKeyCodec):
        inner = [bind_key_codec(member, bucket, name_format) for member in codec.codecs]
        if all(new is old for new, old in zip(inner, codec.codecs, strict=True)):
            return codec
        return ChainKeyCodec(*inner)
    return codec


def _associated(version: int, bucket: str) -> tuple[bytes, ...]:
    """What a token is bound to besides its position: nothing in v1, the bucket in v2."""
    return (_V2_LABEL, bucket.encode()) if version == 2 else ()


def _position(position: int) -> bytes:
    return position.to_bytes(4, "big")
