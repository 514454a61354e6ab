"""Durations: one convention for every duration a caller passes, and their wire form.

Callers pass seconds (``int``/``float``), a ``timedelta`` or a duration string: a Go duration
(``"90s"``, ``"1h30m"``, ``"500ms"``), which may also use ``d`` for days (``"30d"``, ``"1d12h"``),
as the server's own configuration files do not but people write. The JSON API carries
durations as integer nanoseconds; :class:`Duration` is the ``timedelta`` that travels that way,
so no caller ever sees or passes raw nanoseconds.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, Final, TypeAlias

from .._errors import ClientValidationError

__all__ = [
    "Duration",
    "DurationValue",
    "decode_hook",
    "encode_hook",
    "go_duration_ns",
    "optional_duration",
    "parse_duration",
    "seconds_of",
]

DurationValue: TypeAlias = int | float | timedelta | str
"""What callers may pass as a duration: seconds, a timedelta, ``"90s"``, ``"1h"``, ``"30d"``."""

_NS_PER_UNIT: Final = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign, as Go accepts
    "\u03bcs": 1_000,  # Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
    "d": 86_400_000_000_000,  # not Go's, but what "30d" means to everyone
}
_TERM: Final = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h|d)")
_MAX_NS: Final = 2**63 - 1  # Go's time.Duration limit, ~292 years
_MAX_DURATION: Final = timedelta(microseconds=_MAX_NS // 1_000)
_MAX_SECONDS: Final = _MAX_NS // 1_000_000_000


class Duration(timedelta):
    """A ``timedelta`` that the JetStream JSON API carries as integer nanoseconds."""

    def __repr__(self) -> str:
        return f"Duration(seconds={self.total_seconds():g})"

    @classmethod
    def of(cls, value: timedelta | None) -> Duration | None:
        """``value`` as a Duration; ``None`` and zero stay "not set" (``None``)."""
        return cls(microseconds=value // timedelta(microseconds=1)) if value else None


def go_duration_ns(text: str) -> int | None:
    """Nanoseconds of a Go ``time.ParseDuration`` string (plus ``d`` for days), or None if it
    is not one."""
    body = text[1:] if text[:1] in "+-" else text
    negative = text.startswith("-")
    if body == "0":
        return 0
    if not body:
        return None
    total = Decimal(0)
    pos = 0
    while pos < len(body):
        term = _TERM.match(body, pos)
        if term is None:
            return None
        try:
            total += Decimal(term.group(1)) * _NS_PER_UNIT[term.group(2)]
        except InvalidOperation:
            return None
        pos = term.end()
    if total > _MAX_NS:
        return None
    return -int(total) if negative else int(total)


def parse_duration(
    value: DurationValue,
    *,
    name: str,
    error: type[ClientValidationError] = ClientValidationError,
) -> timedelta:
    """A caller's duration as a ``timedelta``: seconds, a ``timedelta``, or a duration string.

    Raises:
        ClientValidationError (or ``error``): a bool, NaN/infinite, negative, or a string that
            is not a duration (the message names the field ``name``).
    """
    if isinstance(value, timedelta):
        result = value
    elif isinstance(value, bool) or not isinstance(value, int | float | str):
        raise error(f"{name} must be seconds, a timedelta or a string like '90s', not {value!r}")
    elif isinstance(value, str):
        ns = go_duration_ns(value.strip())
        if ns is None:
            raise error(f"invalid {name} {value!r}: use seconds or a duration: '90s', '1h', '30d'")
        result = timedelta(microseconds=ns // 1_000)
    else:
        if value != value or value in (float("inf"), float("-inf")):
            raise error(f"{name} must be finite: {value!r}")
        if abs(value) > _MAX_SECONDS:  # timedelta itself overflows beyond ~2.7e12 years
            raise error(f"{name} is longer than the server's ~292 years: {value!r}")
        result = timedelta(seconds=value)
    if result < timedelta(0):
        raise error(f"{name} must not be negative: {value!r}")
    if result > _MAX_DURATION:  # the wire form is an int64 of nanoseconds (Go's Duration)
        raise error(f"{name} is longer than the server's ~292 years: {value!r}")
    return result


def seconds_of(value: DurationValue, *, name: str) -> float:
    """:func:`parse_duration` in seconds (a float), for the options kept as seconds.

    Raises:
        ClientValidationError: as :func:`parse_duration`.
    """
    return parse_duration(value, name=name).total_seconds()


def optional_duration(
    value: DurationValue | None,
    *,
    name: str,
    error: type[ClientValidationError] = ClientValidationError,
) -> Duration | None:
    """:func:`parse_duration` as a :class:`Duration`, with ``None`` and zero meaning "not set"
    (the server's zero value for every duration field).

    Raises:
        ClientValidationError (or ``error``): as :func:`parse_duration`.
    """
    if value is None:
        return None
    parsed = parse_duration(value, name=name, error=error)
    return Duration.of(parsed)


def encode_hook(obj: Any) -> Any:
    """msgspec ``enc_hook``: a :class:`Duration` goes on the wire as integer nanoseconds."""
    if isinstance(obj, timedelta):
        return obj // timedelta(microseconds=1) * 1_000
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


def decode_hook(kind: type, obj: Any) -> Any:
    """msgspec ``dec_hook``: integer nanoseconds from the wire become a :class:`Duration`."""
    if kind is Duration and isinstance(obj, int) and not isinstance(obj, bool):
        return Duration(microseconds=obj // 1_000)
    raise NotImplementedError(f"cannot decode {kind.__name__} from {obj!r}")
