"""The command line's pure parts: put-many input, sizes, durations, name=value pairs, where a
downloaded object may be written, and which error gives which exit code."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import click
import pytest

import jetstream
import kvstore
import objstore
from jetstore._output import exit_code_for
from jetstore._records import Record, format_of, read_records
from jetstore._transfer import plan_uploads
from jetstore._values import duration, pairs, size_option


def parse_records(text: str, fmt: str, tmp_path: Path, limit: int = 1 << 20) -> list[Record]:
    source = tmp_path / "records"
    source.write_text(text)
    return read_records(str(source), fmt, limit)  # type: ignore[arg-type]


def test_records_from_json_jsonl_and_csv(tmp_path: Path) -> None:
    json_object = parse_records('{"a": "1", "b": "2"}', "json", tmp_path)
    assert json_object == [Record("a", b"1"), Record("b", b"2")]
    json_array = '[{"key": "a", "value": "1", "ttl": "1h"}, {"key": "b", "value": ""}]'
    assert parse_records(json_array, "json", tmp_path) == [
        Record("a", b"1", "1h"),
        Record("b", b""),
    ]
    jsonl = (
        '{"key": "a", "value_base64": "AAE=", "ttl": 60, "revision": 0}\n\n'
        '{"key": "b", "value": ""}\n'
    )
    assert parse_records(jsonl, "jsonl", tmp_path) == [
        Record("a", b"\x00\x01", "60", 0),
        Record("b", b""),
    ]
    csv = "key,value,ttl\na,x,1h\nb,,\n"
    assert parse_records(csv, "csv", tmp_path) == [Record("a", b"x", "1h"), Record("b", b"")]


@pytest.mark.parametrize(
    ("text", "fmt", "message"),
    [
        ("[1]", "json", "record 1: a record must be an object"),
        ('{"key": "a"}', "jsonl", "line 1: 'value' must be a string"),
        ('{"key": "a", "value": "1"}\n{"key": "a", "value": "2"}', "jsonl", "more than once"),
        ('{"key": "a", "value_base64": "!!"}', "jsonl", "not base64"),
        ('{"key": "a", "value": "1", "revision": -1}', "jsonl", "revision"),
        ("{", "json", "not JSON"),
        ('[{"key": "a", "value": "1"} {"key": "b", "value": "2"}]', "json", "expecting ','"),
        ('{"a": "1", "a": "2"}', "json", "more than once"),
        ('{"a": "1"} []', "json", "after the end"),
        ('{"key": "a", "value": "\\ud800"}', "jsonl", "not valid Unicode text"),
        ("value\n1\n", "csv", "'key' column"),
    ],
)
def test_bad_records_are_usage_errors(text: str, fmt: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(click.UsageError, match=message):
        parse_records(text, fmt, tmp_path)


def test_format_from_suffix_or_option() -> None:
    assert format_of("x.NDJSON", None) == "jsonl" and format_of("-", "csv") == "csv"
    with pytest.raises(click.UsageError, match="--format"):
        format_of("-", None)


def test_sizes_durations_and_pairs() -> None:
    convert = lambda text: size_option(None, None, text)  # type: ignore[arg-type]  # noqa: E731
    assert [convert(t) for t in ["1024", "1K", "10MiB", "2g", "-1"]] == [
        1024, 1024, 10 << 20, 2 << 30, -1,
    ]  # fmt: skip
    with pytest.raises(click.BadParameter):
        convert("ten")
    assert duration("90", "max_age") == timedelta(seconds=90)
    assert duration("1h30m", "max_age") == timedelta(minutes=90)
    with pytest.raises(click.BadParameter, match="max_age"):
        duration("soon", "max_age")
    assert pairs(("a=1", "b=x=y"), "--meta") == {"a": "1", "b": "x=y"}
    with pytest.raises(click.BadParameter):
        pairs(("novalue",), "--meta")


def test_upload_plan_names_files_by_their_path_in_the_directory(tmp_path: Path) -> None:
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "sub" / "x").write_bytes(b"1")
    (tmp_path / "d" / "y").write_bytes(b"22")
    (tmp_path / "f").write_bytes(b"333")
    plan = plan_uploads((str(tmp_path / "d"), str(tmp_path / "f")), None, "p/")
    assert [(u.name, u.size) for u in plan.uploads] == [("p/sub/x", 1), ("p/y", 2), ("p/f", 3)]
    with pytest.raises(click.UsageError, match="stored as 'f'"):
        plan_uploads((str(tmp_path / "f"), str(tmp_path / "f")), None, "")


def test_exit_codes() -> None:
    assert exit_code_for(kvstore.KeyNotFoundError("k")) == 1
    assert exit_code_for(kvstore.WrongRevisionError("k", 1, 2, err_code=10071)) == 1
    assert exit_code_for(objstore.DigestMismatchError("bad")) == 1
    assert exit_code_for(kvstore.InvalidKeyError("bad")) == 2
    assert exit_code_for(jetstream.InvalidTTLError("bad")) == 2
    assert exit_code_for(click.UsageError("bad")) == 2
    assert exit_code_for(jetstream.ConnectionFailedError("down")) == 3
    assert exit_code_for(jetstream.AuthenticationError("no")) == 3
    assert exit_code_for(jetstream.RequestTimeoutError("slow")) == 3
    assert exit_code_for(jetstream.PermissionDeniedError("acl")) == 3
    assert exit_code_for(KeyboardInterrupt()) == 130
