"""Stream and consumer names checked with the server's rules before they enter a subject.

A name becomes one token of an API subject (``$JS.API.STREAM.INFO.<name>``): a ``.`` would
add tokens, ``*``/``>`` would make it a wildcard (``STREAM.INFO.KV_b.>``), whitespace or a
control character would break the protocol line, and an empty name leaves a trailing dot that
nobody answers (retried until the deadline). nats-server refuses such names when it creates a
stream or consumer (``isValidAssetName``: no ``' \\t\\r\\n\\f.*>\\\\/'``, at most
``JSMaxNameLen`` = 255 bytes); other control characters (NUL) are refused here too.
"""

from __future__ import annotations

import functools
import re
from typing import Final

from .._errors import ClientValidationError, InvalidNameError

__all__ = ["MAX_NAME_BYTES", "validate_name", "validate_priority_group", "validate_subject_token"]

MAX_NAME_BYTES = 255
"""nats-server's ``JSMaxNameLen`` for stream and consumer names."""

# Lone surrogates (from json.loads or surrogateescape) are no text UTF-8 can carry.
_FORBIDDEN = re.compile(r"[\x00-\x20\x7f.*>/\\\ud800-\udfff]")
_BREAKS_SUBJECT = re.compile(r"[\x00-\x20\x7f\ud800-\udfff]")


def validate_name(name: str, what: str = "stream") -> str:
    """``name`` if the server accepts it as a stream or consumer name (``what`` says which,
    for the message).

    Raises:
        InvalidNameError: not a non-empty str, longer than 255 bytes, or holding whitespace,
            a control character, ``.``, ``*``, ``>``, ``/`` or ``\\``.
    """
    if not isinstance(name, str) or not name:
        raise InvalidNameError(f"{what} name must be a non-empty string: {name!r}")
    return _checked(name, what)


@functools.lru_cache(maxsize=1024)  # a bucket's stream name is checked on every get
def _checked(name: str, what: str) -> str:
    bad = _FORBIDDEN.search(name)
    if bad is not None:
        raise InvalidNameError(
            f"invalid {what} name {name!r}: {bad.group()!r} is not allowed (no whitespace, "
            "control characters, lone surrogates, '.', '*', '>', '/' or '\\\\')"
        )
    if len(name.encode()) > MAX_NAME_BYTES:
        raise InvalidNameError(f"{what} name longer than {MAX_NAME_BYTES} bytes: {name[:40]!r}...")
    return name


def validate_subject_token(subject: str, what: str = "subject", *, tokens: bool = True) -> str:
    """``subject`` if it can be appended to an API subject: non-empty, no whitespace or
    control characters (they would break the protocol line) and, with ``tokens``, no empty
    token (wildcards are the caller's business).

    Raises:
        ClientValidationError: it would break or change the API subject.
    """
    if not isinstance(subject, str) or not subject or _BREAKS_SUBJECT.search(subject):
        raise ClientValidationError(f"invalid {what}: {subject!r}")
    if tokens and (subject[0] == "." or subject[-1] == "." or ".." in subject):
        raise ClientValidationError(f"invalid {what} (empty token): {subject!r}")
    return subject


_GROUP: Final = re.compile(r"[-_/=a-zA-Z0-9]{1,16}")


def validate_priority_group(group: str) -> str:
    """``group`` if the server accepts it as a priority group name (ADR-42: 1 to 16 of
    ``A-Z a-z 0-9 - _ / =``).

    Raises:
        ClientValidationError: it is not.
    """
    if not isinstance(group, str) or not _GROUP.fullmatch(group):
        raise ClientValidationError(
            f"invalid priority group {group!r}: 1 to 16 letters, digits, '-', '_', '/' or '='"
        )
    return group
