"""Text input read a record at a time, none held longer than a limit: lines (JSON Lines, CSV)
and the values of one JSON document. An input that never ends a record (``/dev/zero``, a
runaway generator) is refused once the limit is passed, instead of being read whole."""

from __future__ import annotations

import codecs
import io
import json
import re
from collections.abc import Iterator
from typing import Any, TextIO

import click

__all__ = ["BoundedLines", "JsonStream", "too_long"]

_CHUNK = 64 * 1024
_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def too_long(where: str, limit: int) -> click.UsageError:
    """The error for a record past the limit."""
    return click.UsageError(
        f"{where}: a record longer than {limit} characters, more than any value the bucket "
        "takes needs; nothing was stored"
    )


class BoundedLines:
    """The lines of ``text``; the lines of one record (:meth:`record_done` starts the next)
    hold at most ``limit`` characters together.

    Raises (when iterated):
        click.UsageError: a record longer than ``limit``.
    """

    def __init__(self, text: TextIO, limit: int) -> None:
        self._text = text
        self._limit = limit
        self._held = 0
        self.number = 0

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        line = self._text.readline(self._limit + 1 - self._held)
        if not line:
            raise StopIteration
        self.number += 1
        self._held += len(line)
        if self._held > self._limit:
            raise too_long(f"line {self.number}", self._limit)
        return line

    def record_done(self) -> None:
        self._held = 0


class JsonStream:
    """A JSON document in UTF-8 (a byte-order mark skipped) read a value at a time: a record
    (from :meth:`start_record` to the end of its last value) longer than ``limit`` characters
    is refused, and no more than about twice that is held (more is read only while the
    record is shorter, and only what the input has ready: a pipe's writer need not finish
    for a record to be refused).

    Each method takes ``where`` (``"record 3"``) for its errors. Raises:
        click.UsageError: not JSON, nested too deeply, or a record longer than ``limit``.
        UnicodeDecodeError: the input is not UTF-8.
    """

    def __init__(self, source: io.BufferedReader, limit: int) -> None:
        self._source = source
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self._limit = limit
        self._buffer = ""
        self._pos = 0
        self._start = 0
        self._eof = False

    def start_record(self) -> None:
        self._start = self._pos

    def take(self, char: str, where: str) -> bool:
        """Consume ``char`` if it comes next (after whitespace)."""
        if self._next_char(where) != char:
            return False
        self._pos += 1
        return True

    def at_end(self, where: str) -> bool:
        """Whether only whitespace is left."""
        return self._next_char(where) == ""

    def value(self, where: str) -> Any:
        """The next JSON value."""
        self._next_char(where)
        while True:
            try:
                value, end = _DECODER.raw_decode(self._buffer, self._pos)
            except json.JSONDecodeError as exc:
                if self._fill(where):
                    continue  # cut off where the read stopped, or malformed: read on to tell
                raise click.UsageError(f"{where}: not JSON: {exc.msg}") from None
            except RecursionError:
                raise click.UsageError(f"{where}: JSON nested too deeply") from None
            # A value that reaches the end of what was read (a number) may go on.
            if end < len(self._buffer) or not self._fill(where):
                if end - self._start > self._limit:
                    raise too_long(where, self._limit)
                self._pos = end
                return value

    def _next_char(self, where: str) -> str:
        while True:
            match = _SPACE.match(self._buffer, self._pos)
            assert match is not None  # it matches the empty string
            self._pos = match.end()
            if self._pos < len(self._buffer):
                return self._buffer[self._pos]
            if not self._fill(where):
                return ""

    def _fill(self, where: str) -> bool:
        """Read more, False at the end of the input: as much again as the record holds, so
        a long value is decoded a bounded number of times per character."""
        if self._eof:
            return False
        held = len(self._buffer) - self._start
        if held > self._limit:
            raise too_long(where, self._limit)
        data = self._read(max(_CHUNK, held))
        self._buffer = self._buffer[self._start :] + data
        self._pos -= self._start
        self._start = 0
        self._eof = not data
        return True

    def _read(self, size: int) -> str:
        """What the input has ready, up to ``size`` bytes decoded; "" at its end."""
        while True:
            data = self._source.read1(size)
            text = self._decoder.decode(data, final=not data)
            if text or not data:  # a read may end inside a character, or hold only the BOM
                return text
