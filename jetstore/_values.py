"""Option values from the command line: sizes, durations, ``key=value`` pairs and a value
given as an argument, a file or stdin. Bad text is a usage error (exit 2) naming the option."""

from __future__ import annotations

import re
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import click

import jetstream

__all__ = ["SIZE", "DurationType", "SizeType", "duration", "pairs", "read_value"]

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


class SizeType(click.ParamType):
    """Bytes as ``1048576``, ``512K``, ``10MiB``, ``1G`` (powers of 1024), or -1 = unlimited."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value)
        if text.strip() == "-1":
            return -1
        match = _SIZE.match(text)
        if match is None:
            self.fail(f"{text!r} is not a size (bytes, or 512K, 10MiB, 1G; -1 = unlimited)", param, ctx)
        return int(match.group(1)) * 1024 ** _POWERS[match.group(2).lower()]


SIZE = SizeType()


def duration(text: str, name: str) -> timedelta:
    """``90``, ``90s``, ``1h30m``, ``30d`` as a timedelta (plain numbers are seconds).

    Raises:
        click.BadParameter: not a duration.
    """
    value: float | str = text
    try:
        value = float(text)
    except ValueError:
        pass
    try:
        return jetstream.parse_duration(value, name=name)
    except jetstream.ClientValidationError as exc:
        raise click.BadParameter(str(exc), param_hint=f"--{name.replace('_', '-')}") from None


class DurationType(click.ParamType):
    """A duration option: seconds or ``90s``, ``1h30m``, ``30d``."""

    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> timedelta:
        if isinstance(value, timedelta):
            return value
        return duration(str(value), (param.name if param and param.name else "duration"))


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


def read_value(value: str | None, file: Path | None) -> bytes:
    """The value of a write: the argument (UTF-8), the file's bytes, or stdin (``-`` or no
    argument with stdin not a terminal).

    Raises:
        click.UsageError: both an argument and ``--file``, or nothing to read.
    """
    if value is not None and file is not None:
        raise click.UsageError("give the value as an argument or with --file, not both")
    if file is not None:
        return file.read_bytes()
    if value is not None and value != "-":
        return value.encode()
    if value is None and sys.stdin.isatty():
        raise click.UsageError("no value: give it as an argument, with --file, or on stdin")
    return sys.stdin.buffer.read()
