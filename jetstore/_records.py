"""The input of ``kv put-many``: records from a JSON, JSON Lines or CSV file (or stdin), all
read and checked before anything is sent, a record at a time (none longer than a limit).

- JSON: an object ``{"key": "value", ...}`` or an array of records;
- JSON Lines: one record per line;
- CSV: a header row naming the columns ``key``, ``value`` (or ``value_base64``), and
  optionally ``ttl`` and ``revision``.

A record has ``key``, ``value`` (text, stored as UTF-8) or ``value_base64`` (bytes), and
optionally ``ttl`` (seconds or ``"1h"``, ``"never"``) and ``revision`` (the key's expected
revision; 0 = must not exist yet).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import csv
import dataclasses
import io
import itertools
import json
from collections.abc import Callable, Generator, Iterator
from typing import Any, Literal

import click

from ._bounded_text import BoundedLines, JsonStream
from ._input import STDIN, open_input

__all__ = ["Format", "Record", "format_of", "read_records"]

Format = Literal["json", "jsonl", "csv"]
_SUFFIXES: dict[str, Format] = {
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
}


@dataclasses.dataclass(frozen=True)
class Record:
    """One key to store: its bytes, its own TTL (text as given) and expected revision."""

    key: str
    value: bytes
    ttl: str | None = None
    revision: int | None = None


def format_of(path: str, given: str | None) -> Format:
    """The input format: ``--format``, else the file's suffix.

    Raises:
        click.UsageError: neither tells (stdin needs ``--format``).
    """
    if given is not None:
        return given  # type: ignore[return-value]  # click.Choice checked it
    for suffix, fmt in _SUFFIXES.items():
        if path.lower().endswith(suffix):
            return fmt
    raise click.UsageError(f"cannot tell the format of {path!r}: give --format json|jsonl|csv")


def read_records(path: str, fmt: Format, limit: int) -> list[Record]:
    """Every record of ``path`` (``-``: stdin), which must be UTF-8 (a byte-order mark is
    skipped); a record longer than ``limit`` characters is refused as soon as that much of it
    was read.

    Raises:
        click.UsageError: unreadable input, not UTF-8 (a UTF-16 export, say), malformed input,
            a record without key or value, a repeated key, a record longer than ``limit``.
    """
    where = "stdin" if path == STDIN else repr(path)
    seen: set[str] = set()
    records = []
    try:
        with open_input(path) as source, contextlib.closing(_READERS[fmt](source, limit)) as read:
            for record in read:
                if record.key in seen:
                    raise click.UsageError(f"key {record.key!r} appears more than once")
                seen.add(record.key)
                records.append(record)
    except UnicodeDecodeError as exc:
        raise click.UsageError(
            f"{where} is not UTF-8 text ({exc.reason}); convert it first"
        ) from None
    except OSError as exc:
        raise click.UsageError(f"cannot read {where}: {exc.strerror or exc}") from None
    return records


@contextlib.contextmanager
def _lines(source: io.BufferedReader, limit: int) -> Iterator[BoundedLines]:
    """The input's lines (``\\r\\n`` kept for csv); the caller closes ``source``."""
    text = io.TextIOWrapper(source, encoding="utf-8-sig", newline="")
    try:
        yield BoundedLines(text, limit)
    finally:
        text.detach()


def _from_jsonl(source: io.BufferedReader, limit: int) -> Generator[Record, None, None]:
    with _lines(source, limit) as lines:
        for line in lines:
            lines.record_done()
            if line.strip():
                where = f"line {lines.number}"
                yield _record(_load(line, where), where)


def _load(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.UsageError(f"{where}: not JSON: {exc}") from None
    except RecursionError:
        raise click.UsageError(f"{where}: JSON nested too deeply") from None


def _from_json(source: io.BufferedReader, limit: int) -> Generator[Record, None, None]:
    document = JsonStream(source, limit)
    if document.take("[", "input"):
        yield from _array_records(document)
    elif document.take("{", "input"):
        yield from _object_records(document)
    else:
        raise click.UsageError("JSON input must be an object {key: value} or an array of records")
    if not document.at_end("input"):
        raise click.UsageError("input: not JSON: more after the end of the document")


def _array_records(document: JsonStream) -> Iterator[Record]:
    document.start_record()
    if document.take("]", "record 1"):
        return
    for n in itertools.count(1):
        where = f"record {n}"
        yield _record(document.value(where), where)
        if _last(document, "]", where):
            return


def _object_records(document: JsonStream) -> Iterator[Record]:
    document.start_record()
    if document.take("}", "key 1"):
        return
    for n in itertools.count(1):
        key = document.value(f"key {n}")
        if not isinstance(key, str):
            raise click.UsageError(f"key {n}: not JSON: a name must be a string")
        where = f"key {key!r}"
        if not document.take(":", where):
            raise click.UsageError(f"{where}: not JSON: expecting ':'")
        yield _record({"key": key, "value": document.value(where)}, where)
        if _last(document, "}", where):
            return


def _last(document: JsonStream, close: str, where: str) -> bool:
    """After a record: the closing bracket (True) or ``,`` and the next record."""
    if document.take(close, where):
        document.start_record()  # what follows the document is no part of the record
        return True
    if not document.take(",", where):
        raise click.UsageError(f"{where}: not JSON: expecting ',' or '{close}' after it")
    document.start_record()
    return False


def _from_csv(source: io.BufferedReader, limit: int) -> Generator[Record, None, None]:
    # A value may be as large as the server takes (1 MiB and more), past csv's 128 KiB; no
    # field is longer than its record.
    csv.field_size_limit(limit)
    with _lines(source, limit) as lines:
        try:
            yield from _csv_records(csv.DictReader(lines), lines)
        except csv.Error as exc:
            raise click.UsageError(f"CSV input: {exc}") from None


def _csv_records(reader: csv.DictReader[str], lines: BoundedLines) -> Iterator[Record]:
    if reader.fieldnames is None or "key" not in reader.fieldnames:
        raise click.UsageError("CSV input needs a header row with a 'key' column")
    lines.record_done()
    for n, row in enumerate(reader, 2):
        lines.record_done()  # the row is whole: the next record starts
        item = {name: value for name, value in row.items() if value not in (None, "")}
        item.setdefault("key", "")
        if "value" not in item and "value_base64" not in item and "value" in reader.fieldnames:
            item["value"] = ""  # an empty CSV cell is an empty value
        yield _record(item, f"line {n}")


_READERS: dict[Format, Callable[[io.BufferedReader, int], Generator[Record, None, None]]] = {
    "json": _from_json,
    "jsonl": _from_jsonl,
    "csv": _from_csv,
}


def _record(item: Any, where: str) -> Record:
    if not isinstance(item, dict):
        raise click.UsageError(f"{where}: a record must be an object with key and value")
    key = item.get("key")
    if not isinstance(key, str) or not key:
        raise click.UsageError(f"{where}: no 'key'")
    return Record(key, _value(item, where), _ttl(item.get("ttl"), where), _rev(item, where))


def _value(item: dict[str, Any], where: str) -> bytes:
    if "value_base64" in item:
        try:
            return base64.b64decode(str(item["value_base64"]), validate=True)
        except binascii.Error:
            raise click.UsageError(f"{where}: value_base64 is not base64") from None
    value = item.get("value")
    if not isinstance(value, str):
        raise click.UsageError(f"{where}: 'value' must be a string (or give 'value_base64')")
    try:
        return value.encode()
    except UnicodeEncodeError:  # a lone surrogate escape ("\\ud800") is no text
        raise click.UsageError(
            f"{where}: 'value' is not valid Unicode text (give 'value_base64')"
        ) from None


def _ttl(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise click.UsageError(f"{where}: 'ttl' must be seconds or a string like '1h'")
    return str(value)


def _rev(item: dict[str, Any], where: str) -> int | None:
    value = item.get("revision")
    if value is None:
        return None
    try:
        revision = int(value)
    except (TypeError, ValueError):
        revision = -1
    if isinstance(value, bool) or revision < 0:
        raise click.UsageError(f"{where}: 'revision' must be a revision >= 0")
    return revision
