"""Text from the wire: the one policy for bytes that other clients wrote.

Every subject, header block and JSON record a reader of jetstore decodes goes through here:

* **Subjects** name things (a KV key, an object's meta record), so they are decoded as strict
  UTF-8: a subject that is not UTF-8 cannot become a ``str`` without turning into another
  subject. A delivery whose subject (or reply subject) is not UTF-8 is *undecodable*: every
  reader skips it, counts it (``JetStream.skipped_messages`` and the reader's ``skipped``) and
  reports it once, as an :class:`UndecodableMessageError` naming its stream sequence (to the
  reader's error callback, or as a warning of the ``jetstream`` logger); a read that asked for
  that very message (a direct get of its sequence) raises it. The server stores such subjects
  from any client allowed to publish on a stream's subjects.
* **Header values** describe: bytes that are not UTF-8 read as U+FFFD, as nats-py shows them.
  The headers jetstore interprets (``KV-Operation``, ``Nats-TTL``, ``Nats-Marker-Reason``,
  ``Jetstore-Enc``, ...) have ASCII values, which a replacement never produces, so a bad byte in
  another header never hides a message's key or value. A header whose value *is* a subject
  (``Nats-Subject`` of a direct get) follows the subject rule.
* **JSON records** (API replies, object meta records, group configs, typed values): text that is
  not UTF-8, or an escaped lone surrogate (``"\\ud800"``), makes the record malformed, as any
  other JSON error does, and each decoder raises its own typed error for it.

The other way, a ``str`` the caller gives that UTF-8 cannot carry (a lone surrogate, as
``json.loads`` or ``surrogateescape`` make) is refused before anything is sent: names and
subjects by their validators, JSON bodies by :func:`encode_json`, subjects and headers handed to
nats-py by :func:`jetstream._transport.nats_errors.nats_errors`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import msgspec

from .._errors import ClientValidationError

__all__ = [
    "decode_json",
    "encode_json",
    "not_text",
    "shown_bytes",
    "subject_text",
    "utf8_or_none",
    "utf8_size",
]

T = TypeVar("T")


def subject_text(raw: bytes) -> str | None:
    """``raw`` as text, or None when it is not UTF-8 (the message carrying it is undecodable)."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return None


def utf8_or_none(text: str) -> str | None:
    """``text`` when it is what UTF-8 bytes decode to, else None: a header value kept with
    ``surrogateescape`` (see :func:`jetstream._protocol.message.parse_headers`) holds lone
    surrogates where its bytes were not UTF-8."""
    if text.isascii():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        return None
    return text


def shown_bytes(raw: bytes | str) -> str:
    """How an undecodable subject is named in messages: its bytes, escaped (``b'$KV.b.k\\xff'``)."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    return repr(raw)


def not_text(error: UnicodeEncodeError, what: str) -> ClientValidationError:
    """The typed error for a ``str`` (``error.object``) that UTF-8 cannot carry."""
    text = error.object if isinstance(error.object, str) else ""
    return ClientValidationError(
        f"{what}: {text[:200]!r} holds a lone surrogate ({text[error.start : error.end]!r}): "
        "not text UTF-8 can carry"
    )


def utf8_size(text: str, what: str) -> int:
    """How many bytes ``text`` takes as UTF-8.

    Raises:
        ClientValidationError: it holds a lone surrogate.
    """
    if text.isascii():
        return len(text)
    try:
        return len(text.encode())
    except UnicodeEncodeError as exc:
        raise not_text(exc, what) from None


def encode_json(encode: Callable[[object], bytes], value: object, *, what: str = "JSON") -> bytes:
    """``encode(value)`` for a msgspec JSON encoder, a lone surrogate refused as bad input.

    Raises:
        ClientValidationError: a string in ``value`` holds a lone surrogate.
    """
    try:
        return encode(value)
    except UnicodeEncodeError as exc:
        raise not_text(exc, what) from None


def decode_json(decode: Callable[[bytes], T], data: bytes) -> T:
    """``decode(data)`` for a msgspec JSON decoder, with text that is not UTF-8 raised as the
    malformed JSON it is: msgspec raises ``UnicodeDecodeError`` for it, which callers catching
    ``msgspec.DecodeError`` would let through raw. (msgspec already refuses lone surrogates.)

    Raises:
        msgspec.DecodeError: not JSON, not UTF-8, or (``ValidationError``) not of the type.
    """
    try:
        return decode(data)
    except UnicodeDecodeError as exc:
        raise msgspec.DecodeError(
            f"JSON text is not UTF-8 (byte {exc.start}: {exc.object[exc.start : exc.end]!r})"
        ) from None
