"""The input of ``kv put-many``: records from a JSON, JSON Lines or CSV file (or stdin), all
read and checked before anything is sent.

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
import csv
import dataclasses
import io
import json
from pathlib import Path
from typing import Any, Literal

import click

from ._endings import stdin_binary

__all__ = ["Format", "Record", "format_of", "parse_records", "read_input"]

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


def read_input(path: str) -> str:
    """The text of ``path`` (``-``: stdin), which must be UTF-8 (a byte-order mark is
    skipped).

    Raises:
        click.UsageError: not UTF-8 (a UTF-16 export, say), or the file cannot be read.
    """
    where = "stdin" if path == "-" else repr(path)
    try:
        data = stdin_binary().read() if path == "-" else Path(path).read_bytes()
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise click.UsageError(
            f"{where} is not UTF-8 text ({exc.reason} at byte {exc.start}); convert it first"
        ) from None
    except OSError as exc:
        raise click.UsageError(f"cannot read {where}: {exc.strerror or exc}") from None


def parse_records(text: str, fmt: Format) -> list[Record]:
    """Every record of the input, or a usage error naming the first bad one.

    Raises:
        click.UsageError: malformed input, a record without key or value, a repeated key.
    """
    if fmt == "json":
        records = _from_json(text)
    elif fmt == "jsonl":
        records = [_record(_load(line, f"line {n}"), f"line {n}") for n, line in _lines(text)]
    else:
        records = _from_csv(text)
    seen: set[str] = set()
    for record in records:
        if record.key in seen:
            raise click.UsageError(f"key {record.key!r} appears more than once")
        seen.add(record.key)
    return records


def _lines(text: str) -> list[tuple[int, str]]:
    return [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


def _load(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.UsageError(f"{where}: not JSON: {exc}") from None
    except RecursionError:
        raise click.UsageError(f"{where}: JSON nested too deeply") from None


def _from_json(text: str) -> list[Record]:
    document = _load(text, "input")
    if isinstance(document, dict):
        return [_record({"key": k, "value": v}, f"key {k!r}") for k, v in document.items()]
    if isinstance(document, list):
        return [_record(item, f"record {n}") for n, item in enumerate(document, 1)]
    raise click.UsageError("JSON input must be an object {key: value} or an array of records")


def _from_csv(text: str) -> list[Record]:
    # A value may be as large as the server takes (1 MiB and more), past csv's 128 KiB.
    csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
    try:
        return _csv_records(csv.DictReader(io.StringIO(text)))
    except csv.Error as exc:
        raise click.UsageError(f"CSV input: {exc}") from None


def _csv_records(reader: csv.DictReader[str]) -> list[Record]:
    if reader.fieldnames is None or "key" not in reader.fieldnames:
        raise click.UsageError("CSV input needs a header row with a 'key' column")
    records = []
    for n, row in enumerate(reader, 2):
        item = {name: value for name, value in row.items() if value not in (None, "")}
        item.setdefault("key", "")
        if "value" not in item and "value_base64" not in item and "value" in reader.fieldnames:
            item["value"] = ""  # an empty CSV cell is an empty value
        records.append(_record(item, f"line {n}"))
    return records


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
    return value.encode()


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
