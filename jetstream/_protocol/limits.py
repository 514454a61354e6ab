"""What the server accepts in one message, checked before anything is sent.

The server closes the connection on a message it cannot take (nats-py then gives up for good
and every later call fails), so these limits are client-side checks, not server answers:

* ``max_payload`` (from the server's INFO, ``nc.max_payload``) bounds the header block plus
  the payload of a ``PUB``/``HPUB`` (the subject is not counted): "Maximum Payload Violation".
* ``max_control_line`` (4096 bytes by default; INFO does not announce it) bounds the protocol
  line's arguments: ``<subject> <reply> <size>``, or ``<subject> <reply> <hdr> <total>`` with
  headers: "Maximum Control Line Exceeded".
"""

from __future__ import annotations

from collections.abc import Mapping

from nats.aio.client import Client

from .._errors import ClientValidationError, ValueTooLargeError
from .text import utf8_size

__all__ = [
    "MAX_CONTROL_LINE",
    "REQUEST_TOKEN_LENGTH",
    "check_message_size",
    "check_subject_length",
    "header_block_size",
    "header_lines_size",
    "payload_room",
    "subject_room",
]

MAX_CONTROL_LINE = 4096
"""The server's default ``max_control_line``; a server configured lower is not detectable."""

REQUEST_TOKEN_LENGTH = 22 + 1 + 22 + 4
"""What nats-py appends to the inbox prefix for a request's reply subject:
``.<nuid>.<nuid><4 hex>`` (the response subscription's id, then the request's)."""

_HEADER_LINE = len(b"NATS/1.0\r\n")


def header_lines_size(headers: Mapping[str, str]) -> int:
    """Bytes of ``Name: value\\r\\n`` lines for ``headers`` (UTF-8).

    Raises:
        ClientValidationError: a name or value holds a lone surrogate.
    """
    size = 0
    for name, value in headers.items():  # checked for every message of a batch: ASCII
        if name.isascii() and value.isascii():  # (nearly every header) is counted without
            size += len(name) + len(value) + 4  # encoding it
        else:
            size += utf8_size(name, "header name") + utf8_size(value, f"header {name!r}") + 4
    return size


def header_block_size(headers: Mapping[str, str] | None) -> int:
    """Bytes of the header block sent for ``headers``: 0 without headers."""
    if not headers:
        return 0
    return _HEADER_LINE + header_lines_size(headers) + 2


def check_message_size(
    nc: Client,
    subject: str,
    headers: Mapping[str, str] | None,
    payload_size: int,
    *,
    extra_headers: int = 0,
) -> None:
    """Refuse a message the server would count over its ``max_payload`` (header block plus
    payload; ``extra_headers`` bytes of header lines added later, e.g. by a batch).

    Raises:
        ValueTooLargeError: the message does not fit; the message names the sizes.
    """
    limit = nc.max_payload
    block = header_block_size(headers)
    if extra_headers:
        block = (block or _HEADER_LINE + 2) + extra_headers
    if limit and block + payload_size > limit:
        raise ValueTooLargeError(
            f"message to {subject[:80]!r} is {block + payload_size} bytes ({payload_size} of "
            f"payload, {block} of headers); the server's max_payload is {limit}"
        )


def subject_room(nc: Client, *, headers: bool = True) -> int:
    """The longest subject a request (with a nats-py reply inbox) may have on this connection:
    the control line minus the reply subject and the size fields."""
    reply = len(getattr(nc, "_inbox_prefix", b"_INBOX")) + REQUEST_TOKEN_LENGTH
    sizes = len(str(max(nc.max_payload, 1))) + 1
    return MAX_CONTROL_LINE - 1 - reply - sizes * (2 if headers else 1)


def check_subject_length(nc: Client, subject: str) -> None:
    """Refuse a subject whose publish line the server would not accept.

    Raises:
        ClientValidationError: the subject is longer than :func:`subject_room`, or holds a
            lone surrogate.
    """
    room = subject_room(nc)
    size = utf8_size(subject, "subject")
    if size > room:
        raise ClientValidationError(
            f"subject of {size} bytes is longer than the {room} the server's "
            f"control line leaves ({MAX_CONTROL_LINE} bytes): {subject[:80]!r}..."
        )


def payload_room(nc: Client, headers: Mapping[str, str] | None) -> int:
    """The largest payload that fits the server's ``max_payload`` beside ``headers``."""
    return nc.max_payload - header_block_size(headers)
