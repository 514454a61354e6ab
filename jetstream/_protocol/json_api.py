"""The JSON of the JetStream API: requests encoded, replies decoded or raised as the
registered error for ``{"error": {...}}``."""

from __future__ import annotations

import functools
from typing import TypeVar

import msgspec

from .._errors import JetStreamError, error_from_api
from .duration import decode_hook, encode_hook
from .models import ApiError
from .text import decode_json, encode_json

__all__ = ["decode_reply", "encode_request", "raise_for_error"]

T = TypeVar("T")

encode_request = functools.partial(encode_json, msgspec.json.Encoder(enc_hook=encode_hook).encode)
"""A request body as JSON: durations as nanoseconds; a lone surrogate in a name or
description is a ClientValidationError."""


class _ErrorProbe(msgspec.Struct):
    error: ApiError | None = None


_probe_decoder = msgspec.json.Decoder(_ErrorProbe)
_decoders: dict[type[object], msgspec.json.Decoder[object]] = {}


def _decoder(response_type: type[T]) -> msgspec.json.Decoder[T]:
    dec = _decoders.get(response_type)
    if dec is None:
        dec = _decoders[response_type] = msgspec.json.Decoder(response_type, dec_hook=decode_hook)
    return dec  # type: ignore[return-value]


def raise_for_error(error: ApiError | None) -> None:
    """Raise the registered exception for a server error object; do nothing for None."""
    if error is not None:
        raise error_from_api(error.code, error.err_code, error.description)


def decode_reply(data: bytes, response_type: type[T], *, subject: str = "") -> T:
    """Decode a JSON API reply, raising the server's error if it carries one.

    Raises:
        JetStreamError: the registered error, or a reply that is not valid JSON for the type.
    """
    try:
        if b'"error"' in data:  # cheap filter; the probe decides
            raise_for_error(decode_json(_probe_decoder.decode, data).error)
        return decode_json(_decoder(response_type).decode, data)
    except msgspec.DecodeError as exc:
        raise JetStreamError(f"undecodable reply on {subject or 'API'}: {data[:200]!r}") from exc
