"""Stored messages as returned by direct get, and the parsing of its reply headers."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import msgspec

from .. import headers as hdr
from .._crypto.hidden_payload import PayloadHidden
from .._errors import JetStreamError, UndecodableMessageError
from .text import shown_bytes, utf8_or_none

__all__ = [
    "AckReply",
    "StoredMessage",
    "ns_of_time",
    "parse_ack_reply",
    "parse_header_block",
    "parse_headers",
    "parse_timestamp",
    "stored_message_id",
    "time_of_ns",
    "timestamp_ns",
]

_FRACTION = re.compile(r"\.\d+")

# Headers the server appends to a direct-get reply; the rest are the message's own.
_DIRECT_GET_HEADERS = frozenset(
    {hdr.STREAM, hdr.SUBJECT, hdr.SEQUENCE, hdr.TIME_STAMP, hdr.NUM_PENDING, hdr.LAST_SEQUENCE}
)


class StoredMessage(PayloadHidden, msgspec.Struct, frozen=True):
    """A message as stored in a stream: subject, stream sequence, server time, headers, data.
    Its repr shows the data's size, not the data.

    ``headers`` holds only the headers the message was published with (plus any the server
    stored with it, such as ``Nats-Marker-Reason`` on markers), not the direct-get bookkeeping.
    """

    subject: str
    seq: int
    time_ns: int
    """The server's time of the write, in nanoseconds since the epoch (as it stores it)."""
    headers: dict[str, str]
    data: bytes

    _payload = "data"

    @property
    def time(self) -> datetime:
        """:attr:`time_ns` as an aware UTC datetime (truncated to microseconds)."""
        return time_of_ns(self.time_ns)

    @classmethod
    def from_direct_get(cls, headers: dict[str, str], data: bytes) -> StoredMessage:
        """Build from a direct-get reply's headers and payload.

        Raises:
            JetStreamError: the reply lacks the ``Nats-Subject``/``Nats-Sequence`` headers.
            UndecodableMessageError: the stored subject is not UTF-8.
        """
        try:
            raw_subject = headers[hdr.SUBJECT]
            seq = int(headers[hdr.SEQUENCE])
            time_ns = timestamp_ns(headers[hdr.TIME_STAMP])
        except (KeyError, ValueError) as exc:
            raise JetStreamError(f"malformed direct get reply headers: {headers!r}") from exc
        subject = utf8_or_none(raw_subject)
        if subject is None:
            stream = headers.get(hdr.STREAM, "")
            raise UndecodableMessageError(
                f"the message at sequence {seq} of {stream}: its subject "
                f"{shown_bytes(raw_subject)} is not UTF-8",
                stream=stream,
                seq=seq,
            )
        own = {k: v for k, v in headers.items() if k not in _DIRECT_GET_HEADERS}
        return cls(subject=subject, seq=seq, time_ns=time_ns, headers=own, data=data)


def parse_header_block(block: bytes) -> dict[str, str]:
    """Parse a ``NATS/1.0\\r\\nName: value\\r\\n...`` header block (as stored in streams).

    A repeated name keeps its last value, as nats-py does.

    Raises:
        ValueError: the block does not start with ``NATS/1.0``.
    """
    if not block:
        return {}
    if not block.startswith(b"NATS/1.0"):
        raise ValueError(f"not a NATS header block: {block[:40]!r}")
    return parse_headers(block)


def parse_headers(block: bytes) -> dict[str, str]:
    """The headers of a delivered ``NATS/1.0[ <code>[ <description>]]\\r\\n...`` block, as
    nats-py reports them: an inline status as ``Status`` and ``Description``; names trimmed,
    ASCII and without whitespace (others skipped), values trimmed of ASCII whitespace and
    decoded with replacement characters for bad UTF-8; a repeated name keeps its last value.

    Much cheaper than nats-py's parser, which tests every name character in Python: this is
    on the path of every message a watch or consumer receives.

    The one exception to the replacement characters (:mod:`jetstream._protocol.text`): the value of
    ``Nats-Subject`` is a subject, and one that is not UTF-8 keeps its bytes as lone surrogates
    (``surrogateescape``), so that a reader can tell it is not a subject it may name."""
    try:
        text = block.decode()
    except UnicodeDecodeError:
        return _replaced(_parse_text(block.decode("utf-8", "surrogateescape")))
    return _parse_text(text)


def _parse_text(text: str) -> dict[str, str]:
    first, _, rest = text.partition("\r\n")
    headers: dict[str, str] = {}
    status_line = first[8:].strip()  # after "NATS/1.0"
    if status_line:
        code, _, description = status_line.partition(" ")
        if code.isdigit():
            headers["Status"] = code
        description = description.strip()
        if description:
            headers["Description"] = description
    names = _NAMES
    for line in rest.split("\r\n"):
        name, sep, value = line.partition(":")
        if sep:
            valid = names.get(name)
            if valid is None and name not in names:
                valid = _header_name(name)
            if valid is not None:
                headers[valid] = value.strip(_ASCII_SPACE)
    return headers


def _replaced(headers: dict[str, str]) -> dict[str, str]:
    """Headers decoded with ``surrogateescape``, their values (but a subject's) with the bytes
    that are not UTF-8 as U+FFFD."""
    for name, value in headers.items():
        if name != hdr.SUBJECT and not value.isascii():
            headers[name] = value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return headers


def _header_name(raw: str) -> str | None:
    """``raw`` as nats-py keeps it (None: skipped), remembered for the next message (most
    blocks repeat the same few names): stripped of ASCII whitespace, as nats-py strips bytes,
    and skipped if not ASCII or with any whitespace left (\\x1c-\\x1f included)."""
    name = raw.strip(_ASCII_SPACE)
    valid = name if name.isascii() and not any(map(str.isspace, name)) else None
    # Bounded in count and size: names come from other clients too (up to 64 KiB each).
    if len(raw) <= _MAX_NAME_LENGTH and len(_NAMES) < _MAX_NAMES:
        _NAMES[raw] = valid
    return valid


_NAMES: dict[str, str | None] = {}
_MAX_NAMES = 4096
_MAX_NAME_LENGTH = 64


_ASCII_SPACE = " \t\n\r\x0b\x0c"
"""What ``bytes.strip()`` strips."""


def parse_timestamp(text: str) -> datetime:
    """Parse the server's RFC 3339 timestamps (nanosecond precision, ``Z``) into aware UTC.

    Python keeps microseconds, so the extra digits are dropped.

    Raises:
        ValueError: not an RFC 3339 timestamp.
    """
    text = _FRACTION.sub(lambda m: m.group(0)[:7].ljust(7, "0"), text, count=1)
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


_RFC3339 = re.compile(
    r"(\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d)(?:\.(\d{1,9})\d*)?([Zz]|[+-]\d\d:\d\d)", re.ASCII
)


def timestamp_ns(text: str) -> int:
    """The server's RFC 3339 timestamp (``2026-11-27T21:05:09.123456789Z``) in nanoseconds since
    the epoch, every digit kept (a datetime keeps microseconds only).

    Raises:
        ValueError: not an RFC 3339 timestamp.
    """
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    zone = match[3]
    whole = datetime.fromisoformat(match[1] + ("+00:00" if zone in "Zz" else zone))
    seconds = (whole - _EPOCH) // timedelta(seconds=1)
    return seconds * 1_000_000_000 + int((match[2] or "").ljust(9, "0"))


def ns_of_time(when: datetime) -> int:
    """``when`` (an aware datetime) in nanoseconds since the epoch.

    Raises:
        ValueError: ``when`` is naive (no time zone: which instant it names is unknown).
    """
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(f"a time without a time zone: {when.isoformat()}")
    return (when - _EPOCH) // timedelta(microseconds=1) * 1_000


def time_of_ns(ns: int) -> datetime:
    """The UTC time of ``ns`` nanoseconds since the epoch, truncated to microseconds.

    Below 2**32 seconds (year 2106) ``fromtimestamp`` of the float seconds is exact: the double
    is within a quarter microsecond of the whole microseconds and it rounds to the nearest one
    (0.4 µs against 0.7 µs for epoch + timedelta, on every delivered message). Later times take
    the exact, slower sum.

    Raises:
        OverflowError, ValueError: a time outside what ``datetime`` can hold.
    """
    micros = ns // 1_000
    if 0 <= micros < _FLOAT_EXACT_MICROS:
        return datetime.fromtimestamp(micros / 1_000_000, UTC)
    return _EPOCH + timedelta(microseconds=micros)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_END_OF_DATETIME_NS = ns_of_time(datetime.max.replace(tzinfo=UTC)) + 1_000
_FLOAT_EXACT_MICROS = 2**32 * 1_000_000


class AckReply(msgspec.Struct, frozen=True):
    """What a consumer delivery's reply subject says about the message."""

    stream: str
    consumer: str
    delivered: int
    stream_seq: int
    consumer_seq: int
    time_ns: int
    """The message's time in the stream, in nanoseconds since the epoch."""
    pending: int

    @property
    def time(self) -> datetime:
        """:attr:`time_ns` as an aware UTC datetime (truncated to microseconds), made when
        read: a watch builds one only for the entries whose ``created`` someone reads."""
        return time_of_ns(self.time_ns)


def _ack_tokens(reply: str) -> tuple[list[str], int]:
    """The tokens of an ack reply subject and the index of its stream token."""
    tokens = reply.split(".")
    count = len(tokens)
    if count < 9 or tokens[0] != "$JS" or tokens[1] != "ACK":
        raise ValueError(f"not a JetStream ack reply: {reply!r}")
    return tokens, 4 if count >= 11 else 2  # $JS.ACK.<domain>.<account hash>.<stream>...


def parse_ack_reply(reply: str) -> AckReply:
    """Parse ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>``, also in
    the 12-token form with domain and account hash.

    Raises:
        ValueError: not a JetStream ack subject.
    """
    tokens = reply.split(".")
    # The 9-token form inline: this runs for every delivered message (a watch's events).
    if len(tokens) != 9 or tokens[0] != "$JS" or tokens[1] != "ACK":
        tokens, base = _ack_tokens(reply)
        tokens = tokens[base - 2 :]
    try:
        reply_meta = AckReply(
            tokens[2],
            tokens[3],
            int(tokens[4]),
            int(tokens[5]),
            int(tokens[6]),
            int(tokens[7]),
            int(tokens[8]),
        )
    except (ValueError, IndexError) as exc:
        raise ValueError(f"not a JetStream ack reply: {reply!r}") from exc
    if not 0 <= reply_meta.time_ns < _END_OF_DATETIME_NS:  # its time could never be read
        raise ValueError(f"not a JetStream ack reply (time out of range): {reply!r}")
    return reply_meta


def stored_message_id(reply: str) -> str:
    """What identifies the stored message behind a delivery, cheaply (one string, nothing
    parsed): ``"<stream sequence> <time in the stream>"`` as the ack reply ``reply`` writes
    them. Every delivery of one message has the same; a stream deleted and made again under
    its name reuses sequences, never times.

    Raises:
        ValueError: not a JetStream ack subject.
    """
    tokens, base = _ack_tokens(reply)
    return tokens[base + 3] + " " + tokens[base + 5]
