"""Key codecs: user keys (any text, paths, unicode) <-> NATS KV keys, wire-compatible with
orbit.go ``kvcodec`` (see docs/CODECS.md for the facts each rule comes from).

A key codec turns the key a user names into the key stored in the subject
``$KV.<bucket>.<stored key>`` and back. A :class:`FilterableKeyCodec` also turns a filter with
``*``/``>`` wildcards into a filter on stored keys, such that a user key matches the user
filter exactly when its stored key matches the stored filter.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final, Protocol, runtime_checkable

from jetstream import ClientValidationError, WrongTypeError

from ._errors import FilterNotSupportedError, InvalidKeyError, KeyDecodeError

__all__ = [
    "Base64KeyCodec",
    "ChainKeyCodec",
    "FilterableKeyCodec",
    "KeyCodec",
    "NoOpKeyCodec",
    "PathKeyCodec",
    "encode_filter",
]

_WILDCARDS: Final = ("*", ">")
_BASE64URL: Final = re.compile(r"[A-Za-z0-9_-]*")
_ROOT: Final = "_root_"
"""orbit.go ``path_codec.go`` ``rootPrefix``: the stored first token of a path with a leading
``/`` (a subject cannot start with a dot)."""


@runtime_checkable
class KeyCodec(Protocol):
    """Turns user keys into stored keys and back.

    ``encode_key`` raises :class:`InvalidKeyError` for a key it cannot represent;
    ``decode_key`` raises :class:`KeyDecodeError` for a stored key it did not make. The
    bucket checks every encoded key against the NATS KV key rules afterwards.
    """

    def encode_key(self, key: str) -> str: ...

    def decode_key(self, stored: str) -> str: ...


@runtime_checkable
class FilterableKeyCodec(KeyCodec, Protocol):
    """A key codec that can also encode filters with ``*`` and ``>`` wildcards."""

    def encode_filter(self, pattern: str) -> str: ...


def checked_stored(stored: str) -> str:
    """``stored``, checked to be a str (a stored key comes from a subject).

    Raises:
        WrongTypeError: it is not.
    """
    if not isinstance(stored, str):
        raise WrongTypeError(f"a stored key is a str, not {type(stored).__name__}")
    return stored


class NoOpKeyCodec:
    """Keys are stored as given (orbit.go ``NoOpCodec``); filters too."""

    def encode_key(self, key: str) -> str:
        """Return ``key`` unchanged."""
        return key

    def decode_key(self, stored: str) -> str:
        """Return ``stored`` unchanged."""
        return stored

    def encode_filter(self, pattern: str) -> str:
        """Return ``pattern`` unchanged."""
        return pattern

    def __repr__(self) -> str:
        return "NoOpKeyCodec()"


class Base64KeyCodec:
    """Each dot-separated token is stored as its UTF-8 bytes in base64url without padding
    (orbit.go ``Base64Codec``: ``strings.Split(key, ".")`` then
    ``base64.RawURLEncoding`` per token), so any text is a key and dots still separate
    tokens: ``"Acme Inc.contact"`` is stored as ``"QWNtZSBJbmM.Y29udGFjdA"``.

    Filters keep ``*`` and ``>`` tokens as wildcards and encode every other token, so token
    filters still work (a token that *is* ``*`` or ``>`` cannot be named literally in a filter).
    Empty tokens (``""``, ``"a..b"``, ``".a"``) are refused: they would make an invalid subject.
    Decoding is strict: only canonical unpadded base64url of valid UTF-8 is accepted.
    """

    def encode_key(self, key: str) -> str:
        """The stored key for ``key``.

        Raises:
            InvalidKeyError: ``key`` is not a str, has an empty token, or is not encodable
                as UTF-8 (a lone surrogate).
        """
        return ".".join(_b64_token(token, key) for token in _tokens(key))

    def decode_key(self, stored: str) -> str:
        """The user key ``stored`` stands for.

        Raises:
            KeyDecodeError: a token is not canonical unpadded base64url of UTF-8 text.
            WrongTypeError: ``stored`` is not a str.
        """
        return ".".join(_unb64_token(token, stored) for token in checked_stored(stored).split("."))

    def encode_filter(self, pattern: str) -> str:
        """The stored filter for ``pattern``: ``*``/``>`` tokens kept, others encoded.

        Raises:
            InvalidKeyError: as :meth:`encode_key`.
        """
        return ".".join(
            token if token in _WILDCARDS else _b64_token(token, pattern)
            for token in _tokens(pattern)
        )

    def __repr__(self) -> str:
        return "Base64KeyCodec()"


class PathKeyCodec:
    """Path-style keys (``"config/app/db"``, ``"/etc/hosts"``) stored as NATS tokens, as
    orbit.go ``PathCodec``: ``/`` becomes ``.``; a leading ``/`` becomes a first token
    ``_root_`` (``"/"`` alone is ``"_root_"``); one trailing ``/`` is dropped, so ``"a/b/"``
    and ``"a/b"`` are the same key (keys come back without it).

    Stricter than orbit, so that two different paths never share a stored key: a path may
    not contain ``.`` (orbit would store ``"a.b"`` like ``"a/b"``), nor start with the segment
    ``_root_`` (orbit would store ``"_root_/x"`` like ``"/x"``); stored keys containing ``/``
    (which orbit never writes) do not decode. Filters are encoded as keys, so ``"a/*"`` and
    ``"/logs/>"`` work as token filters.
    """

    def encode_key(self, key: str) -> str:
        """The stored key for the path ``key``.

        Raises:
            InvalidKeyError: not a str, empty, contains ``.``, or starts with ``_root_``.
        """
        if not isinstance(key, str) or not key:
            raise InvalidKeyError(f"invalid path key {key!r}: use a non-empty str")
        if "." in key:
            raise InvalidKeyError(f"invalid path key {key!r}: '.' is not allowed, use '/'")
        if key.split("/", 1)[0] == _ROOT:
            raise InvalidKeyError(f"invalid path key {key!r}: {_ROOT!r} is reserved for '/'")
        if key == "/":
            return _ROOT
        if key.startswith("/"):
            key = f"{_ROOT}/{key[1:]}"
        key = key.removesuffix("/")  # orbit: subjects have no trailing dot
        return key.replace("/", ".")

    def decode_key(self, stored: str) -> str:
        """The path ``stored`` stands for.

        Raises:
            KeyDecodeError: ``stored`` contains ``/`` (not written through this codec).
            WrongTypeError: ``stored`` is not a str.
        """
        if "/" in checked_stored(stored):
            raise KeyDecodeError(stored, "a path codec's stored keys contain no '/'")
        if stored == _ROOT:
            return "/"
        if stored.startswith(_ROOT + "."):
            return "/" + stored[len(_ROOT) + 1 :].replace(".", "/")
        return stored.replace(".", "/")

    def encode_filter(self, pattern: str) -> str:
        """The stored filter for ``pattern`` (encoded like a key; ``*``/``>`` segments stay).

        Raises:
            InvalidKeyError: as :meth:`encode_key`.
        """
        return self.encode_key(pattern)

    def __repr__(self) -> str:
        return "PathKeyCodec()"


class ChainKeyCodec:
    """Several key codecs in a row (orbit.go ``NewKeyChainCodec``): encoding runs them first
    to last, decoding last to first. ``ChainKeyCodec(PathKeyCodec(), Base64KeyCodec())``
    stores ``"/a/b"`` as ``"X3Jvb3Rf.YQ.Yg"``.

    Filters with wildcards work only if every codec in the chain is filterable; otherwise
    :class:`FilterNotSupportedError` (orbit refuses every filter then; a filter without
    wildcards is encoded as a key here).

    Raises:
        ClientValidationError: no codecs, or one that is not a :class:`KeyCodec`.
    """

    def __init__(self, *codecs: KeyCodec) -> None:
        if not codecs:
            raise ClientValidationError("ChainKeyCodec needs at least one codec")
        for codec in codecs:
            if not isinstance(codec, KeyCodec):
                raise ClientValidationError(f"not a key codec: {codec!r}")
        self.codecs: tuple[KeyCodec, ...] = codecs

    def encode_key(self, key: str) -> str:
        """Every codec's ``encode_key``, first to last.

        Raises:
            InvalidKeyError: a codec refused the key.
        """
        for codec in self.codecs:
            key = codec.encode_key(key)
        return key

    def decode_key(self, stored: str) -> str:
        """Every codec's ``decode_key``, last to first.

        Raises:
            KeyDecodeError: a codec refused the stored key.
        """
        for codec in reversed(self.codecs):
            stored = codec.decode_key(stored)
        return stored

    def encode_filter(self, pattern: str) -> str:
        """Every codec's ``encode_filter``, first to last.

        Raises:
            FilterNotSupportedError: a wildcard, and a codec in the chain is not filterable.
            InvalidKeyError: a codec refused the filter.
        """
        for codec in self.codecs:
            pattern = encode_filter(codec, pattern)
        return pattern

    def __repr__(self) -> str:
        return f"ChainKeyCodec({', '.join(map(repr, self.codecs))})"


def encode_filter(codec: KeyCodec, pattern: str) -> str:
    """``pattern`` encoded by ``codec``: through ``encode_filter`` when it has one, else as a
    key if it has no wildcard character (orbit.go ``kv.go`` ``WatchFiltered`` checks for
    ``*`` and ``>`` anywhere in the pattern, and so do we). ``">"`` alone (every key) needs no
    encoding and works with any codec, as orbit's ``WatchAll``/``Keys`` do.

    Raises:
        FilterNotSupportedError: a wildcard and a codec that cannot encode filters.
        InvalidKeyError: the codec refused the pattern.
    """
    if pattern == ">":
        return pattern
    if isinstance(codec, FilterableKeyCodec):
        return codec.encode_filter(pattern)
    if isinstance(pattern, str) and any(w in pattern for w in _WILDCARDS):
        raise FilterNotSupportedError(
            f"key filter {pattern!r}: {codec!r} cannot encode wildcards; list all keys and "
            "filter them in the client"
        )
    return codec.encode_key(pattern)


def _tokens(key: str) -> list[str]:
    if not isinstance(key, str):
        raise InvalidKeyError(f"key must be a str, not {type(key).__name__}")
    tokens = key.split(".")
    if "" in tokens:
        raise InvalidKeyError(f"invalid key {key!r}: empty token (leading, trailing or double dot)")
    return tokens


def _b64_token(token: str, key: str) -> str:
    try:
        raw = token.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidKeyError(
            f"invalid key {key!r}: not encodable as UTF-8 ({exc.reason})"
        ) from None
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64_bytes(token: str, stored: str) -> bytes:
    # Go's RawURLEncoding refuses '=' and characters outside the alphabet, as we do; it
    # accepts non-zero trailing bits, which we refuse so that every key has one stored form.
    if not token or len(token) % 4 == 1 or not _BASE64URL.fullmatch(token):
        raise KeyDecodeError(stored, f"token {token!r} is not unpadded base64url")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError) as exc:
        raise KeyDecodeError(stored, f"token {token!r}: {exc}") from None
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != token:
        raise KeyDecodeError(stored, f"token {token!r} is not canonical base64url")
    return raw


def _unb64_token(token: str, stored: str) -> str:
    raw = _unb64_bytes(token, stored)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise KeyDecodeError(stored, f"token {token!r} is not UTF-8 text") from None
