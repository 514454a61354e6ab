"""Checks of what a caller gives an object store, before anything is sent: object names, chunk
sizes and the text fields of a meta record."""

from __future__ import annotations

from jetstream import ClientValidationError
from jetstream._errors import check_count
from jetstream._protocol.text import utf8_or_none

from ._errors import InvalidObjectNameError

__all__ = ["check_chunk_size", "check_record_text", "validate_object_name"]

_MAX_CHUNK_SIZE = 8 * 1024 * 1024


def check_chunk_size(chunk_size: object) -> int:
    """Raises WrongTypeError (not an int) or ClientValidationError (not 1..8 MiB)."""
    return check_count(chunk_size, "chunk_size", 1, _MAX_CHUNK_SIZE)


def validate_object_name(name: str) -> None:
    """Raises InvalidObjectNameError: not a str, empty, or not text UTF-8 can carry (a lone
    surrogate, as ``json.loads`` or a file name's undecodable bytes give)."""
    if not isinstance(name, str) or not name:
        raise InvalidObjectNameError(f"object names are non-empty strings: {name!r}")
    if utf8_or_none(name) is None:
        raise InvalidObjectNameError(f"object name {name!r} is not UTF-8 text")


def check_record_text(
    description: str | None, meta: dict[str, str] | None, headers: dict[str, list[str]] | None
) -> None:
    """Raises ClientValidationError: a field of the meta record of the wrong type, or a string
    UTF-8 cannot carry (a lone surrogate)."""
    if description is not None and not isinstance(description, str):
        raise ClientValidationError(f"description must be a str: {description!r}")
    if meta is not None and not all(
        isinstance(k, str) and isinstance(v, str) for k, v in meta.items()
    ):
        raise ClientValidationError("meta must map str to str")
    if headers is not None and not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v)
        for k, v in headers.items()
    ):
        raise ClientValidationError("headers must map str to a list of str")
    texts = [description or "", *(meta or {}), *(meta or {}).values(), *(headers or {})]
    texts += [value for values in (headers or {}).values() for value in values]
    for text in texts:
        if utf8_or_none(text) is None:
            raise ClientValidationError(f"{text!r} holds a lone surrogate: not text")
