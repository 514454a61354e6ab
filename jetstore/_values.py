"""Option values from the command line: sizes, durations, ``key=value`` pairs, keys, filters
and TTLs. Bad text is a usage error (exit 2) naming the option."""

from __future__ import annotations

import contextlib
import re
from datetime import timedelta

import click

import jetstream
import kvstore
from jetstream._protocol.duration import parse_duration
from jetstream._protocol.ttl import parse_ttl

__all__ = ["checked", "duration", "duration_option", "pairs", "seconds", "size_option"]

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_POWERS: dict[str, int] = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def size_option(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A size option: bytes as ``1048576``, ``512K``, ``10MiB``, ``1G`` (powers of 1024), or
    -1 = unlimited.

    Raises:
        click.BadParameter: not a size.
    """
    if value is None:
        return None
    if value.strip() == "-1":
        return -1
    match = _SIZE.match(value)
    if match is None:
        raise click.BadParameter(
            f"{value!r} is not a size (bytes, or 512K, 10MiB, 1G; -1 = unlimited)"
        )
    return int(match.group(1)) << (10 * _POWERS[match.group(2).lower()])  # powers of 1024


def duration(text: str, name: str) -> timedelta:
    """``90``, ``90s``, ``1h30m``, ``30d`` as a timedelta (plain numbers are seconds).

    Raises:
        click.BadParameter: not a duration.
    """
    value: float | str = text
    with contextlib.suppress(ValueError):
        value = float(text)
    try:
        return parse_duration(value, name=name)
    except jetstream.ClientValidationError as exc:
        raise click.BadParameter(str(exc), param_hint=f"--{name.replace('_', '-')}") from None


def duration_option(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> timedelta | None:
    """A duration option: seconds or ``90s``, ``1h30m``, ``30d``.

    Raises:
        click.BadParameter: not a duration.
    """
    if value is None:
        return None
    return duration(value, param.name or "duration")


def seconds(text: str, option: str = "--timeout") -> float:
    """Seconds > 0 from a number (``5``, ``0.5``) or a duration (``500ms``, ``10s``: natscli's
    ``--timeout 5s``).

    Raises:
        click.BadParameter: not a time > 0.
    """
    number = duration(text, option.lstrip("-").replace("-", "_")).total_seconds()
    if not number > 0:
        raise click.BadParameter(
            f"{text!r} is not a time > 0 (seconds, or 500ms, 10s)", param_hint=option
        )
    return number


def pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    """``("a=1", "b=2")`` as ``{"a": "1", "b": "2"}``.

    Raises:
        click.BadParameter: an item without ``=`` or with an empty name.
    """
    result: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{item!r} is not name=value", param_hint=option)
        result[name] = value
    return result


def checked(
    *, key: str | None = None, ttl: str | None = None, filters: tuple[str, ...] = ()
) -> None:
    """Refuse a bad key, filter or TTL before connecting (exit 2; nothing is sent, and a
    missing bucket does not hide the mistake).

    Raises:
        click.UsageError: names the library's error class and its message.
    """
    try:
        if key is not None:
            kvstore.validate_key(key)
        for pattern in filters:
            kvstore.validate_filter(pattern)
        if ttl is not None:
            parse_ttl(ttl)
    except jetstream.ClientValidationError as exc:
        raise click.UsageError(f"{type(exc).__name__}: {exc}") from None
