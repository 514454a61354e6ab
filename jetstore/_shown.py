"""Text from the server (keys, names, descriptions, metadata, subjects, values, error messages)
in plain output and in JSON, so that nothing another client stored drives the terminal (sets
its title, clears it, reverses the text) or forges a row or a column.

One rule: a character Python does not call printable (``str.isprintable``: C0 and C1
controls, DEL, line and paragraph separators, bidi and other format characters, spaces other
than ' ', surrogates, private-use and unassigned code points) is shown escaped, as Python
writes it: ``\\n`` ``\\r`` ``\\t``, ``\\xNN``, ``\\uNNNN``, ``\\UNNNNNNNN``. Bytes that are not
UTF-8 show as ``\\xNN`` (when decoded with ``surrogateescape``). A backslash stays as it is, so
ordinary text reads as stored; ``--json`` gives every string exactly.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["json_text", "shown", "shown_value", "text_of"]

# Only these can be unprintable: ASCII text passes at regex speed.
_CANDIDATES = re.compile(r"[^\x20-\x7e]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# What `bytes.decode("utf-8", "surrogateescape")` makes of a byte that is not UTF-8.
_BYTE = range(0xDC80, 0xDD00)


def shown(text: str, *, lines: bool = False) -> str:
    """``text`` for a line of plain output, every unprintable character escaped (see the
    module). With ``lines`` (a value printed on its own), newlines and tabs stay."""
    keep = "\n\t" if lines else ""

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        return char if char.isprintable() or char in keep else _escaped(char)

    return _CANDIDATES.sub(escape, text)


def _escaped(char: str) -> str:
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if code in _BYTE:
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def text_of(value: bytes) -> str | None:
    """The value as text when it is UTF-8, else None."""
    try:
        return value.decode()
    except UnicodeDecodeError:
        return None


def shown_value(value: bytes, limit: int | None = None) -> str:
    """A value on a text line: its text escaped (cut to ``limit`` characters), or
    ``<N bytes>`` when it is not UTF-8."""
    text = text_of(value)
    if text is None:
        return f"<{len(value)} bytes>"
    text = shown(text)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def json_text(document: Any, *, indent: int | None = None) -> str:
    """``document`` as JSON that is valid (lone surrogates included) and holds nothing raw a
    terminal acts on: every unprintable character in a string becomes ``\\uXXXX``; other
    text stays readable (not ASCII-only)."""
    separators = None if indent else (",", ":")
    text = json.dumps(document, indent=indent, ensure_ascii=False, separators=separators)

    # json.dumps escapes C0 controls inside strings: a raw newline is the indentation's.
    def escape(match: re.Match[str]) -> str:
        char = match.group()
        return char if char.isprintable() or char == "\n" else _json_escaped(ord(char))

    return _CANDIDATES.sub(escape, text)


def _json_escaped(code: int) -> str:
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # above the BMP: a surrogate pair, as JSON writes it
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
