"""Per-message TTL values (ADR-43), parsed and formatted with nats-server's rules.

The server (``stream.go`` ``parseMessageTTL``) accepts ``never`` (any case), a Go duration
(``time.ParseDuration``) of at least one second, or a plain non-negative integer of seconds, and
rejects ``0``. It silently truncates fractions (``1.5s`` lives 1 s). We accept the same spellings
plus ``int``/``float`` seconds and ``timedelta``, and we are stricter in one place on purpose: a
TTL that is not a whole number of seconds is refused with :class:`InvalidTTLError` instead of
being truncated, so the lifetime a caller asks for is the lifetime they get.

On the wire we always send integer seconds (``"90"``) or ``never``: every client reads both.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Final, TypeAlias

from .._errors import InvalidTTLError
from .duration import go_duration_ns

__all__ = [
    "NEVER",
    "TTLValue",
    "format_ttl",
    "parse_ttl",
    "parse_ttl_at_least",
    "parse_ttl_header",
    "ttl_seconds",
]

TTLValue: TypeAlias = "int | float | timedelta | str"
"""What callers may pass as a TTL: seconds, a timedelta, ``"never"`` or a Go-style duration."""

NEVER: Final = -1
"""The parsed form of ``"never"``: the message is exempt from TTL and from the stream's max_age."""

_MAX_SECONDS: Final = (2**63 - 1) // 1_000_000_000  # Go's time.Duration limit, ~292 years


def _from_seconds(seconds: Decimal, shown: object) -> int:
    if seconds < 1:
        raise InvalidTTLError(f"TTL must be at least 1 second or 'never': {shown!r}")
    if seconds != seconds.to_integral_value():
        raise InvalidTTLError(
            f"TTL must be a whole number of seconds (the server would truncate it): {shown!r}"
        )
    if seconds > _MAX_SECONDS:
        raise InvalidTTLError(f"TTL is longer than the server can represent: {shown!r}")
    return int(seconds)


def parse_ttl(value: TTLValue) -> int:
    """Turn a caller's TTL into whole seconds (or :data:`NEVER`).

    Accepts ``int``/``float`` seconds, ``timedelta``, ``"never"`` (any case), a Go duration
    (``"90s"``, ``"1h30m"``), days (``"30d"``, ``"1d12h"``: sent as seconds, so every client
    reads it) or a string of integer seconds (``"30"``).

    Raises:
        InvalidTTLError: zero, negative, below one second, not a whole number of seconds,
            longer than ~292 years, a bool, or a string the server would not parse.
    """
    if isinstance(value, bool):
        raise InvalidTTLError(f"TTL must be seconds, a timedelta or a string, not {value!r}")
    if isinstance(value, int):
        return _from_seconds(Decimal(value), value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidTTLError(f"TTL must be finite: {value!r}")
        return _from_seconds(Decimal(repr(value)), value)
    if isinstance(value, timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        return _from_seconds(Decimal(micros) / 1_000_000, value)
    if isinstance(value, str):
        return _parse_ttl_text(value, strict=True)
    raise InvalidTTLError(f"TTL must be seconds, a timedelta or a string, not {value!r}")


def _parse_ttl_text(text: str, *, strict: bool) -> int:
    stripped = text.strip()  # the server trims header values
    if stripped.lower() == "never":
        return NEVER
    ns = go_duration_ns(stripped)
    if ns is not None:
        seconds = Decimal(ns) / 1_000_000_000
        if not strict and seconds >= 1:
            seconds = seconds.to_integral_value(rounding="ROUND_DOWN")
        return _from_seconds(seconds, text)
    if stripped.isascii() and stripped.isdigit():
        return _from_seconds(Decimal(stripped), text)
    raise InvalidTTLError(
        f"invalid TTL {text!r}: use 'never', whole seconds or a duration: '90s', '1h', '30d'"
    )


def parse_ttl_header(text: str) -> int:
    """Read a stored ``Nats-TTL`` header the way the server does (fractions truncated).

    Raises:
        InvalidTTLError: the header is not a valid TTL.
    """
    return _parse_ttl_text(text, strict=False)


def format_ttl(seconds: int) -> str:
    """The ``Nats-TTL`` header value for parsed seconds: ``"never"`` or integer seconds."""
    return "never" if seconds == NEVER else str(seconds)


def ttl_seconds(value: TTLValue | None) -> int | None:
    """:func:`parse_ttl` that lets ``None`` (no TTL) through.

    Raises:
        InvalidTTLError: as :func:`parse_ttl`.
    """
    return None if value is None else parse_ttl(value)


def parse_ttl_at_least(value: TTLValue, floor: timedelta | None, *, owner: str) -> int:
    """:func:`parse_ttl`, refusing a TTL below ``floor`` (a stream's ``marker_ttl``): the server
    would silently stretch it to the floor (``subject_delete_marker_ttl`` on streams keeping more
    than one message per subject), and a key would live longer than asked.

    Raises:
        InvalidTTLError: as :func:`parse_ttl`, or below ``floor`` (``owner`` names the stream).
    """
    seconds = parse_ttl(value)
    if floor is not None and seconds != NEVER and seconds < floor.total_seconds():
        raise InvalidTTLError(
            f"TTL of {seconds}s is below {owner}'s marker_ttl ({floor}); the server would "
            f"stretch it to marker_ttl: use at least {floor.total_seconds():g}s"
        )
    return seconds
