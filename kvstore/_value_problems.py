"""What is wrong with a value a typed view could not encode or decode, said without quoting it.

msgspec's messages may quote the offending value (``Invalid enum value 'hunter2'``, ``Object
contains unknown field `hunter2```, ``invalid opcode '\\xc1'``), and so may a type's own
check (``__post_init__``) or Python's UTF-8 decoder; over an encrypted bucket that is the
decrypted secret. So no such text is passed on: only the parts of msgspec's messages that
come from the *type* are kept, each matched by a pattern below (``Expected `int`, got `str```,
a missing field's name, the path ``$.field[0]``, in which msgspec writes a mapping key as
``[...]``), and every other failure is named by its kind. The text of an error raised by the
type's own code (which msgspec passes on as a ``ValidationError`` caused by it) is never used.
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

__all__ = ["decode_problem", "encode_problem"]

_AT: Final = re.compile(r"(?P<what>.*?)(?: - at `(?P<key>key` in `)?(?P<path>[^`]*)`)?", re.S)
_SAFE_PATH: Final = re.compile(r"\$(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\]|\[\.\.\.\])*")
_EXPECTED: Final = re.compile(
    r"Expected `[A-Za-z0-9_ |]+`"
    r"(?: of length [<>]=? \d+| of length \d+| [<>]=? -?[0-9.e+-]+)?"
    r"(?:, got `[A-Za-z0-9_ |]+`)?"
)
_MISSING: Final = re.compile(r"Object missing required field `[A-Za-z_][A-Za-z0-9_]*`")
_UNENCODABLE: Final = re.compile(r"Encoding objects of type [A-Za-z0-9_.]+ is unsupported")
_FORMATS: Final = {"json": "JSON", "msgpack": "MessagePack"}


def decode_problem(exc: Exception, type_name: str, format: str) -> str:
    """What ``exc``, raised while decoding ``format`` bytes as ``type_name``, says is wrong,
    without any of the value's text. msgspec raises its own errors; anything else came from
    the type's own code (a ``__post_init__``), which msgspec lets through."""
    if isinstance(exc, msgspec.ValidationError):
        own = exc.__cause__ or exc.__context__  # msgspec chains what a __post_init__ raised
        if own is not None:
            return f"{type_name}'s own check raised {type(own).__name__}"
        return _validation_problem(str(exc))
    if isinstance(exc, msgspec.DecodeError):
        return f"malformed {_FORMATS.get(format, format)}"
    if isinstance(exc, UnicodeError):
        return "not UTF-8 text"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return f"{type_name}'s own check raised {type(exc).__name__}"


def encode_problem(exc: Exception, format: str) -> str:
    """What ``exc``, raised by msgspec while encoding a value as ``format``, says is wrong,
    without any of the value's text (only an unsupported type's name is kept)."""
    if isinstance(exc, TypeError) and _UNENCODABLE.fullmatch(str(exc)):
        return str(exc)
    return f"msgspec cannot encode it as {_FORMATS.get(format, format)} ({type(exc).__name__})"


def _validation_problem(message: str) -> str:
    match = _AT.fullmatch(message)
    assert match is not None  # the pattern matches any text
    what, path = match["what"], match["path"]
    shown = _EXPECTED.fullmatch(what) or _MISSING.fullmatch(what)
    if shown is not None:
        problem = shown.group()
    elif what.startswith("Expected `"):
        problem = "a value outside the type's constraints"
    elif what.startswith("Object contains unknown field"):
        problem = "an unknown field"
    else:
        problem = "a value the type does not allow"
    if path is None or not _SAFE_PATH.fullmatch(path):
        return problem
    where = f"a key of `{path}`" if match["key"] else f"`{path}`"
    return f"{problem} at {where}"
