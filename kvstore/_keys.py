"""KV key and filter rules (the same as nats.go's ``kv.go``), checked before send. Bucket names
follow :func:`jetstream.validate_bucket_name` (shared with object stores)."""

from __future__ import annotations

import re
from typing import Final

from jetstream import ClientValidationError

from ._errors import InvalidKeyError

__all__ = ["validate_filter", "validate_key", "validate_revision"]

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


def _check_length(key: object, max_length: int | None, what: str) -> None:
    # Checked first: a key far over the limit is refused without scanning it.
    if max_length is not None and isinstance(key, str) and len(key) > max_length:
        raise InvalidKeyError(
            f"{what} of {len(key)} characters is longer than {max_length}, the most the "
            f"server's control line holds for this bucket: {key[:40]!r}..."
        )


def validate_revision(revision: int, *, allow_zero: bool) -> None:
    """Check a revision argument: an int >= 1 (>= 0 where "no value yet" is meaningful).

    Raises:
        ClientValidationError: not an int (bools included) or out of range.
    """
    lowest = 0 if allow_zero else 1
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < lowest:
        raise ClientValidationError(f"revision must be an int >= {lowest}: {revision!r}")
