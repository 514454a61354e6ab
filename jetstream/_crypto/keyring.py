"""Keyring: the AES-256 keys a program may encrypt and decrypt with, by key id.

Keys come from a key file or an environment variable, never from code::

    keyring = jetstream.Keyring.from_file("/run/secrets/jetstore-keys.json")
    bucket = await kvstore.open_bucket(js, "secrets", encryption=keyring)

The format (file content or variable value) is JSON::

    {"primary": "2026-11", "keys": {"2026-11": "<base64 of 32 bytes>", "2026-01": "..."}}

New values are sealed with the primary key; values sealed with any key of the ring open.
Reprs, errors and messages never show key material.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import itertools
import json
import os
import re
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .. import headers as hdr
from .._errors import (
    ClientValidationError,
    InvalidKeyringError,
    UnknownKeyIdError,
    WrongTypeError,
    check_bytes_like,
)
from .envelope import (
    KEY_ID_PATTERN,
    KEY_SIZE,
    NONCE_SIZE,
    OVERHEAD,
    TAG_SIZE,
    format_header,
    key_prefix,
    open_bound,
    parse_header,
    seal_payload,
)

__all__ = ["Keyring", "Opener", "RekeyReport", "Sealer"]

DEFAULT_KEYRING_ENV = "JETSTORE_KEYRING"
"""The environment variable :meth:`Keyring.from_env` reads by default."""


class Keyring:
    """AES-256 keys by key id, one of them the primary (used for new writes).

    ``Keyring({"2026-11": key, "2026-01": old_key}, primary="2026-11")``: every key is 32
    bytes (``os.urandom(32)``, or :meth:`new_key`); a key id is 1-64 characters from
    ``A-Z a-z 0-9 . _ -`` (it is stored in a header of every value). Prefer
    :meth:`from_file` / :meth:`from_env` to keys written in code.

    Raises:
        InvalidKeyringError: no keys, a key that is not 32 bytes, a bad key id, or a primary
            that is not one of the key ids.
    """

    __slots__ = ("_ciphers", "_keys", "_primary")

    def __init__(self, keys: Mapping[str, bytes], *, primary: str) -> None:
        if not isinstance(keys, Mapping) or not keys:
            raise InvalidKeyringError("a keyring needs a mapping of at least one key id to key")
        ciphers: dict[str, AESGCM] = {}
        for key_id, key in keys.items():
            _check_key_id(key_id)
            if not isinstance(key, bytes | bytearray) or len(key) != KEY_SIZE:
                what = f"{len(key)} bytes" if isinstance(key, bytes | bytearray) else "not bytes"
                raise InvalidKeyringError(
                    f"key {_shown(key_id)} must be {KEY_SIZE} bytes (AES-256), got {what}"
                )
            ciphers[key_id] = AESGCM(bytes(key))
        if not isinstance(primary, str) or primary not in ciphers:
            raise InvalidKeyringError(
                f"primary {_shown(primary)} is not one of the key ids "
                f"[{', '.join(_shown(key_id) for key_id in sorted(ciphers))}]"
            )
        self._ciphers = ciphers
        self._keys = {key_id: bytes(key) for key_id, key in keys.items()}
        self._primary = primary

    @staticmethod
    def new_key() -> bytes:
        """A fresh random 32-byte key (from the OS's CSPRNG), for a key file."""
        return os.urandom(KEY_SIZE)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Keyring:
        """The keyring in a JSON key file (see the module docs for the format).

        Raises:
            InvalidKeyringError: the file cannot be read, or is not a valid key file.
            WrongTypeError: ``path`` is not a str or path.
        """
        if not isinstance(path, str | os.PathLike):
            raise WrongTypeError(f"a key file path is a str or a path, not {type(path).__name__}")
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise InvalidKeyringError(f"cannot read key file {_shown(path)}: {reason}") from None
        except ValueError:  # a NUL in the path
            raise InvalidKeyringError(
                f"cannot read key file {_shown(path)}: a NUL in its path"
            ) from None
        return cls._from_json(text, f"key file {_shown(path)}")

    @classmethod
    def from_env(cls, var: str = DEFAULT_KEYRING_ENV) -> Keyring:
        """The keyring in the environment variable ``var`` (JSON, as a key file).

        Raises:
            InvalidKeyringError: the variable is unset or empty, or not a valid key file.
            WrongTypeError: ``var`` is not a str.
        """
        if not isinstance(var, str):
            raise WrongTypeError(
                f"an environment variable's name is a str, not {type(var).__name__}"
            )
        text = os.environ.get(var)
        if not text:
            raise InvalidKeyringError(f"environment variable {_shown(var)} is not set")
        return cls._from_json(text, f"environment variable {_shown(var)}")

    @classmethod
    def _from_json(cls, text: str, source: str) -> Keyring:
        # Error messages name the field, never its value: the value may be a key.
        try:
            document: Any = json.loads(text, object_pairs_hook=_without_repeats)
        except _RepeatedName as exc:
            # A merge gone wrong: json keeps the last of two "k1"s, silently dropping a key
            # whose values would then all fail as if tampered with.
            raise InvalidKeyringError(f"{source} names {_shown(exc.name)} twice") from None
        except (ValueError, RecursionError):  # RecursionError: nested deeper than Python goes
            raise InvalidKeyringError(f"{source} is not JSON") from None
        if not isinstance(document, dict) or set(document) != {"primary", "keys"}:
            raise InvalidKeyringError(f'{source}: expected {{"primary": ..., "keys": {{...}}}}')
        encoded = document["keys"]
        if not isinstance(encoded, dict):
            raise InvalidKeyringError(f'{source}: "keys" must map key ids to base64 keys')
        keys = {str(key_id): _b64_key(value, key_id, source) for key_id, value in encoded.items()}
        return cls(keys, primary=document["primary"])

    @property
    def primary(self) -> str:
        """The key id new values are sealed with."""
        return self._primary

    @property
    def key_ids(self) -> tuple[str, ...]:
        """Every key id in the ring (sorted)."""
        return tuple(sorted(self._ciphers))

    def __contains__(self, key_id: object) -> bool:
        return key_id in self._ciphers

    def __repr__(self) -> str:
        return f"Keyring(key_ids={list(self.key_ids)!r}, primary={self._primary!r})"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        # Pickling would copy the keys into whatever stores or ships the pickle.
        raise TypeError("a Keyring cannot be pickled; load it from its key file where needed")

    def seal(self, plaintext: bytes, associated_data: bytes) -> tuple[str, bytes]:
        """Encrypt ``plaintext`` with the primary key, bound to ``associated_data``; returns
        the ``Jetstore-Enc`` header value and the payload (see :mod:`jetstream._crypto.envelope`).

        Raises:
            WrongTypeError: ``plaintext`` or ``associated_data`` is not bytes-like.
        """
        check_bytes_like(plaintext, "plaintext")
        check_bytes_like(associated_data, "associated data")
        key_id = self._primary
        payload = seal_payload(self._ciphers[key_id], key_id, plaintext, associated_data)
        return format_header(key_id), payload

    def sealer(self) -> Sealer:
        """A :class:`Sealer` for a sequence of payloads (an object's chunks) with the primary
        key: one random draw for the sequence instead of one per payload."""
        key_id = self._primary
        return Sealer(self._ciphers[key_id], key_id)

    def open(self, header: str, payload: bytes, associated_data: bytes) -> bytes:
        """Decrypt a payload sealed by :meth:`seal` (with any key of the ring).

        Raises:
            UnknownKeyIdError: the header names a key id that is not in the ring.
            DecryptionError: a malformed header, or authentication failed (wrong key,
                tampered payload or header, other associated data).
            ClientValidationError: a header that is not a str, or a payload or associated
                data that is not bytes-like.
        """
        opener = self.opener(header)
        return opener.open_bound(payload, opener.bind(associated_data))

    def opener(self, header: str) -> Opener:
        """An :class:`Opener` for the payloads whose ``Jetstore-Enc`` header is ``header``.

        Raises:
            UnknownKeyIdError: the header names a key id that is not in the ring.
            DecryptionError: a malformed header.
            ClientValidationError: ``header`` is not a str.
        """
        key_id = parse_header(header)
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise UnknownKeyIdError(
                f"key id {_shown(key_id)} is not in the keyring {list(self.key_ids)}", key_id=key_id
            )
        return Opener(cipher, key_id)

    def derive(self, purpose: str, length: int, *, key_id: str | None = None) -> bytes:
        """A key of ``length`` bytes for another algorithm, derived from key ``key_id`` (the
        primary by default) with HKDF-SHA256 and ``purpose`` as its info: one key never
        serves two algorithms, and different purposes get unrelated keys.

        Raises:
            UnknownKeyIdError: ``key_id`` is not in the ring.
        """
        key_id = self._primary if key_id is None else key_id
        key = self._keys.get(key_id)
        if key is None:
            raise UnknownKeyIdError(
                f"key id {_shown(key_id)} is not in the keyring {list(self.key_ids)}", key_id=key_id
            )
        info = f"jetstore {purpose}".encode()
        return HKDF(algorithm=hashes.SHA256(), length=length, salt=None, info=info).derive(key)

    def key_id_of(self, headers: Mapping[str, str]) -> str | None:
        """The key id a stored message's headers name (None: not encrypted).

        Raises:
            DecryptionError: a malformed ``Jetstore-Enc`` header.
        """
        value = headers.get(hdr.ENCRYPTION)
        return None if value is None else parse_header(value)


class Sealer:
    """Seals payloads like :meth:`Keyring.seal`, with nonces that are a random 96-bit base
    drawn once, XOR the payload's number in the sequence (as TLS 1.3 derives record nonces):
    unique within the sealer, random across sealers. One ``os.urandom`` per object instead of
    one per chunk matters: with the digest thread running, each call waited ~0.1 ms for the
    GIL (a quarter of a 128 MiB upload's time).

    Hot paths (every KV value, every object chunk) bind the constant start of their associated
    data once with :meth:`bind` and seal with :meth:`seal_bound`: the same bytes are
    authenticated as with :meth:`seal`, without rebuilding the constant part per payload."""

    __slots__ = (
        "__weakref__",
        "_base",
        "_cipher",
        "_count",
        "_into",
        "_key_id",
        "_prefix",
        "header",
    )

    def __init__(self, cipher: AESGCM, key_id: str) -> None:
        self._cipher = cipher
        self._key_id = key_id
        self.header = format_header(key_id)
        """The ``Jetstore-Enc`` header value of every payload this sealer seals."""
        self._prefix = key_prefix(key_id)
        self._base = 0
        self.redraw()
        self._count = itertools.count()  # next() is atomic: threads never share a nonce
        _LIVE_SEALERS.add(self)
        # cryptography >= 45 encrypts into a caller's buffer: a chunk's payload is then built
        # in place instead of concatenating the nonce to a fresh ciphertext (one copy less).
        self._into = getattr(cipher, "encrypt_into", None)

    def redraw(self) -> None:
        """Draw a new random nonce base. A forked child does this for every sealer it
        inherits: otherwise parent and child would seal with the same nonces under the same
        key, which breaks AES-GCM (it leaks the XOR of the plaintexts and allows forgery)."""
        self._base = int.from_bytes(os.urandom(NONCE_SIZE), "big")

    def bind(self, associated_data: bytes) -> bytes:
        """The bytes :meth:`seal_bound` takes for payloads whose associated data starts with
        ``associated_data`` (append the rest, then seal): ``seal(p, ad)`` and
        ``seal_bound(p, bind(b"") + ad)`` authenticate the same data."""
        return self._prefix + associated_data

    def seal(self, plaintext: bytes, associated_data: bytes) -> tuple[str, bytes]:
        """The ``Jetstore-Enc`` header value and the payload of the next ``plaintext``.

        Raises:
            InvalidKeyringError: the sealer has sealed 2**32 payloads.
        """
        return self.header, self.seal_bound(plaintext, self._prefix + associated_data)

    def seal_bound(self, plaintext: bytes, bound: bytes) -> bytes:
        """The payload of the next ``plaintext`` (``nonce || ciphertext || tag``), bound to
        ``bound`` (built from :meth:`bind`).

        Raises:
            InvalidKeyringError: the sealer has sealed 2**32 payloads.
        """
        count = next(self._count)  # _next_nonce(), inline: this runs for every KV value
        if count >= _MAX_SEALS:
            raise InvalidKeyringError("a sealer seals at most 2**32 payloads; use a new one")
        nonce = (self._base ^ count).to_bytes(NONCE_SIZE, "big")
        return nonce + self._cipher.encrypt(nonce, plaintext, bound)

    def seal_bound_into(self, plaintext: bytes, bound: bytes) -> bytes | bytearray:
        """:meth:`seal_bound` for large payloads (object chunks): the ciphertext is written
        straight after the nonce in one new buffer where ``cryptography`` can.

        Raises:
            InvalidKeyringError: the sealer has sealed 2**32 payloads.
        """
        if self._into is None:
            return self.seal_bound(plaintext, bound)
        nonce = self._next_nonce()
        payload = bytearray(NONCE_SIZE + len(plaintext) + TAG_SIZE)
        payload[:NONCE_SIZE] = nonce
        self._into(nonce, plaintext, bound, memoryview(payload)[NONCE_SIZE:])
        return payload

    def _next_nonce(self) -> bytes:
        count = next(self._count)
        if count >= _MAX_SEALS:
            raise InvalidKeyringError("a sealer seals at most 2**32 payloads; use a new one")
        return (self._base ^ count).to_bytes(NONCE_SIZE, "big")

    def __repr__(self) -> str:
        return f"Sealer(key_id={self._key_id!r})"


class Opener:
    """Opens payloads sealed with one key, the counterpart of :class:`Sealer` for hot read
    paths (every value a ``get_many`` or a watch returns): :meth:`bind` the constant start of
    the associated data once, then :meth:`open_bound` each payload."""

    __slots__ = ("_cipher", "_decrypt", "_prefix", "key_id")

    def __init__(self, cipher: AESGCM, key_id: str) -> None:
        self._cipher = cipher
        self._decrypt = cipher.decrypt
        self.key_id = key_id
        self._prefix = key_prefix(key_id)

    def bind(self, associated_data: bytes) -> bytes:
        """As :meth:`Sealer.bind`: ``Keyring.open(h, p, ad)`` and
        ``opener(h).open_bound(p, bind(b"") + ad)`` authenticate the same data.

        Raises:
            ClientValidationError: ``associated_data`` is not bytes-like.
        """
        if not isinstance(associated_data, bytes):
            if not isinstance(associated_data, bytearray | memoryview):
                raise ClientValidationError(
                    f"associated data is bytes-like, not {type(associated_data).__name__}"
                )
            associated_data = bytes(associated_data)  # as Keyring.seal takes it
        return self._prefix + associated_data

    def open_bound(self, payload: bytes, bound: bytes) -> bytes:
        """The plaintext of ``payload``, bound to ``bound`` (built from :meth:`bind`).

        Raises:
            DecryptionError: too short, or authentication failed.
            ClientValidationError: ``payload`` or ``bound`` is not bytes-like.
        """
        # Every value a get_many or a watch returns comes here: a small well-formed payload
        # is opened at once (its slice costs less than a view), and anything else goes the
        # checked way, which gives the errors and does not copy an object chunk.
        if type(payload) is bytes and OVERHEAD <= len(payload) <= _QUICK_OPEN:
            try:
                return self._decrypt(payload[:NONCE_SIZE], payload[NONCE_SIZE:], bound)
            except (InvalidTag, TypeError):
                pass
        return open_bound(self._cipher, self.key_id, payload, bound)

    def __repr__(self) -> str:
        return f"Opener(key_id={self.key_id!r})"


_MAX_SEALS = 2**32
_QUICK_OPEN = 4096

_LIVE_SEALERS: weakref.WeakSet[Sealer] = weakref.WeakSet()


def _redraw_after_fork() -> None:
    for sealer in list(_LIVE_SEALERS):
        sealer.redraw()


os.register_at_fork(after_in_child=_redraw_after_fork)


@dataclasses.dataclass(frozen=True)
class RekeyReport:
    """What a ``rekey()`` (:meth:`kvstore.Bucket.rekey`, :meth:`objstore.ObjectStore.rekey`)
    did with the live values or objects."""

    rekeyed: int = 0
    """Rewritten under the primary key (plain ones too, with ``allow_plaintext``)."""
    current: int = 0
    """Already under the primary key, left alone."""
    changed: int = 0
    """Replaced (or deleted) by another writer between our read and our write: theirs is
    kept."""
    skipped: int = 0
    """Left as they are (each logged with its key): they do not decrypt, are plain without
    ``allow_plaintext``, expire too soon to be rewritten with their TTL, or would exceed the
    server's ``max_payload`` once rewritten (a KV value within about 100 bytes of it, an object
    whose meta record is that close to it)."""

    def __add__(self, other: RekeyReport) -> RekeyReport:
        return RekeyReport(
            *(getattr(self, f.name) + getattr(other, f.name) for f in dataclasses.fields(self))
        )


def _check_key_id(key_id: object) -> None:
    if not isinstance(key_id, str) or not KEY_ID_PATTERN.fullmatch(key_id):
        raise InvalidKeyringError(
            f"invalid key id {_shown(key_id)}: use 1-64 characters from A-Z a-z 0-9 . _ -"
        )


def _b64_key(value: object, key_id: object, source: str) -> bytes:
    if not isinstance(value, str):
        raise InvalidKeyringError(f"{source}: key {_shown(key_id)} must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidKeyringError(f"{source}: key {_shown(key_id)} is not base64") from None


def _shown(text: object) -> str:
    """A key id, key file path or variable name as an error may show it: a key pasted in the
    wrong place (the ids and values of "keys" swapped, a key as the primary, the key file's
    text for its path) must not end up in a message and from there in logs, so a value with
    a run of base64 as long as a key's is described, not shown."""
    if isinstance(text, str) and not _KEY_RUN.search(text):
        return repr(text) if len(text) <= 200 else f"{text[:200]!r}..."
    length = f"{len(text)} characters" if isinstance(text, str) else type(text).__name__
    return f"<not shown: {length}, it may hold a key>"


_KEY_RUN = re.compile(r"[A-Za-z0-9+/_-]{40,}")
"""As long a run of base64 characters as a key's (43-44): what no id, path or name needs."""


class _RepeatedName(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _without_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict, refusing a name given twice (``json`` keeps the last)."""
    document: dict[str, Any] = {}
    for name, value in pairs:
        if name in document:
            raise _RepeatedName(name)
        document[name] = value
    return document
