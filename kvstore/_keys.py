"""KV key and filter rules (the same as nats.go's ``kv.go``), checked before send. Bucket names
follow :func:`validate_bucket_name` (shared with object stores)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from jetstream import ClientValidationError, WrongTypeError

from ._errors import InvalidKeyError

__all__ = [
    "MAX_REVISION",
    "checked_filters",
    "checked_keys",
    "checked_pairs",
    "distinct_filters",
    "validate_filter",
    "validate_key",
    "validate_limits",
    "validate_revision",
]

_KEY: Final = re.compile(r"[-/_=.a-zA-Z0-9]+")
_FILTER_TOKEN: Final = re.compile(r"[-/_=a-zA-Z0-9]+|\*|>")


def validate_key(key: str, *, max_length: int | None = None) -> None:
    """Check a concrete key: ``[-/_=.a-zA-Z0-9]+``, no leading, trailing or double dot, and at
    most ``max_length`` characters when given (see :attr:`kvstore.Bucket.max_key_length`).

    Raises:
        InvalidKeyError: the key is not a str or breaks a rule (the message says which).
    """
    _check_length(key, max_length, "key")
    if not isinstance(key, str):
        raise InvalidKeyError(f"key must be a str, not {type(key).__name__}")
    if not _KEY.fullmatch(key):
        raise InvalidKeyError(
            f"invalid key {key!r}: use only letters, digits and - / _ = . (no spaces, * or >)"
        )
    if key.startswith(".") or key.endswith(".") or ".." in key:
        raise InvalidKeyError(f"invalid key {key!r}: no leading, trailing or double dots")


def validate_filter(pattern: str, *, max_length: int | None = None) -> None:
    """Check a key filter: dot-separated tokens, each a key token, ``*``, or a final ``>``;
    at most ``max_length`` characters when given.

    Raises:
        InvalidKeyError: the filter breaks a rule.
    """
    _check_length(pattern, max_length, "key filter")
    if not isinstance(pattern, str) or not pattern:
        raise InvalidKeyError(f"invalid key filter {pattern!r}")
    tokens = pattern.split(".")
    for index, token in enumerate(tokens):
        if not _FILTER_TOKEN.fullmatch(token):
            raise InvalidKeyError(f"invalid key filter {pattern!r}: bad token {token!r}")
        if token == ">" and index != len(tokens) - 1:
            raise InvalidKeyError(f"invalid key filter {pattern!r}: '>' must be the last token")


def distinct_filters(patterns: list[str]) -> list[str]:
    """``patterns`` (valid filters) without repeats and without those another one covers
    (``a.b`` under ``a.>``), in their order: the server refuses a consumer whose filters
    overlap (10138), and a covered filter adds nothing.

    Raises:
        InvalidKeyError: two filters overlap without one covering the other (``a.*.c`` and
            ``a.b.>`` share ``a.b.c``): which subjects the caller meant is not clear.
    """
    kept: list[str] = []
    for pattern in dict.fromkeys(patterns):
        if any(_covers(other, pattern) for other in patterns if other != pattern):
            continue
        kept.append(pattern)
    for i, first in enumerate(kept):
        for second in kept[i + 1 :]:
            if _overlap(first.split("."), second.split(".")):
                raise InvalidKeyError(
                    f"key filters {first!r} and {second!r} overlap (the server refuses that); "
                    "pass filters that do not share keys"
                )
    return kept


def _covers(wide: str, narrow: str) -> bool:
    """Whether every subject ``narrow`` matches also matches ``wide``."""
    wide_tokens, narrow_tokens = wide.split("."), narrow.split(".")
    for index, token in enumerate(wide_tokens):
        if token == ">":
            return len(narrow_tokens) > index
        if index >= len(narrow_tokens) or narrow_tokens[index] == ">":
            return False
        if token != "*" and (narrow_tokens[index] == "*" or narrow_tokens[index] != token):
            return False
    return len(wide_tokens) == len(narrow_tokens)


def _overlap(first: list[str], second: list[str]) -> bool:
    """Whether some subject matches both filters (given as tokens)."""
    for a, b in zip(first, second, strict=False):
        if a == ">" or b == ">":
            return True
        if a != "*" and b != "*" and a != b:
            return False
    return len(first) == len(second)


def _check_length(key: object, max_length: int | None, what: str) -> None:
    # Checked first: a key far over the limit is refused without scanning it.
    if max_length is not None and isinstance(key, str) and len(key) > max_length:
        raise InvalidKeyError(
            f"{what} of {len(key)} characters is longer than {max_length}, the most the "
            f"server's control line holds for this bucket: {key[:40]!r}..."
        )


MAX_REVISION = 2**64 - 1
"""The largest stream sequence: the server reads a larger expected revision modulo 2**64, so
``2**64 + current`` would pass its compare-and-set."""


def validate_revision(revision: int, *, allow_zero: bool, what: str = "revision") -> None:
    """Check a revision argument (``what`` names it): an int from 1 (0 where "no value yet"
    is meaningful) up to :data:`MAX_REVISION`.

    Raises:
        ClientValidationError: not an int (bools included) or out of range.
    """
    lowest = 0 if allow_zero else 1
    if (
        isinstance(revision, bool)
        or not isinstance(revision, int)
        or not lowest <= revision <= MAX_REVISION
    ):
        raise ClientValidationError(
            f"{what} must be an int from {lowest} to 2**64-1: {_shown(revision)}"
        )


def checked_pairs(items: object) -> list[tuple[Any, Any]]:
    """The ``(key, value)`` pairs of a mapping or an iterable of pairs (``put_many``).

    Raises:
        WrongTypeError: neither, or an item that is not a pair.
        InvalidKeyError: a key that is not a str (its rules are checked where it is used).
    """
    if isinstance(items, Mapping):
        pairs = list(items.items())
    elif isinstance(items, str | bytes | bytearray) or not isinstance(items, Iterable):
        raise WrongTypeError(f"expected a mapping or (key, value) pairs, not {_shown(items)}")
    else:
        pairs = []
        for pair in items:  # tuples, or lists as JSON and CSV readers give them
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise WrongTypeError(f"expected (key, value) pairs, got {_shown(pair)}")
            pairs.append((pair[0], pair[1]))
    for key, _ in pairs:
        if not isinstance(key, str):  # before any set of keys: a list key is unhashable
            raise InvalidKeyError(f"key must be a str, not {type(key).__name__}")
    return pairs


def checked_keys(keys: object) -> list[Any]:
    """The keys of an iterable of keys (``get_many``), each a str (its rules are checked
    where it is used).

    Raises:
        WrongTypeError: not an iterable, or a single str (its characters are not keys).
        InvalidKeyError: a key that is not a str.
    """
    if isinstance(keys, str | bytes | bytearray) or not isinstance(keys, Iterable):
        raise WrongTypeError(f"expected an iterable of keys, not {_shown(keys)}")
    wanted = list(keys)
    for key in wanted:
        if not isinstance(key, str):
            raise InvalidKeyError(f"key must be a str, not {_shown(key)}")
    return wanted


def checked_filters(filters: object) -> list[Any]:
    """The filters of a key filter or a list of them (``keys``, ``watch``).

    Raises:
        WrongTypeError: neither a str nor an iterable of filters.
    """
    if isinstance(filters, str):
        return [filters]
    if isinstance(filters, bytes | bytearray) or not isinstance(filters, Iterable):
        raise WrongTypeError(f"expected a key filter or a list of them, not {_shown(filters)}")
    return list(filters)


def validate_limits(max_keys: object, timeout: object, deadline: object) -> None:
    """Check a batch's ``max_keys`` (an int >= 1), ``timeout`` (None or seconds > 0) and
    ``deadline`` (seconds > 0).

    Raises:
        ClientValidationError: one of them is out of range or of the wrong type.
    """
    if isinstance(max_keys, bool) or not isinstance(max_keys, int) or max_keys < 1:
        raise ClientValidationError(f"max_keys must be an int >= 1: {max_keys!r}")
    if timeout is not None and not _positive_seconds(timeout):
        raise ClientValidationError(f"timeout must be None or seconds > 0: {timeout!r}")
    if not _positive_seconds(deadline):
        raise ClientValidationError(f"deadline must be seconds > 0: {deadline!r}")


def validate_wait(timeout: object) -> None:
    """Check a wait's ``timeout``: None (for ever) or seconds >= 0 (0: one attempt).

    Raises:
        ClientValidationError: out of range or of the wrong type.
    """
    if timeout is None or (timeout == 0 and not isinstance(timeout, bool)):
        return
    if not _positive_seconds(timeout):
        raise ClientValidationError(f"timeout must be None or seconds >= 0: {timeout!r}")


def _positive_seconds(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and 0 < value < 1e9


def _shown(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"
