"""``kv put-many`` input is read a record at a time, each bounded: a record is refused as soon
as it passes the limit (``/dev/zero`` is not read whole), a record at the limit is read, and
the whole input may be any size. JSON documents are decoded value by value across the reads
that cut them, with the same records as ``json.loads`` gives."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetstore._records import Record, read_records


def _written(tmp_path: Path, text: str) -> str:
    source = tmp_path / "records"
    source.write_text(text)
    return str(source)


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv"])
def test_an_endless_input_is_refused_at_the_limit(fmt: str) -> None:
    with pytest.raises(click.UsageError, match=r"must be an object|longer than 1000 characters"):
        read_records("/dev/zero", fmt, 1000)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fmt", "before", "record", "after"),
    [
        ("jsonl", "", '{"key": "a", "value": "%s"}\n', ""),
        ("json", "[", ' {"key": "a", "value": "%s"}', "]"),
        ("json", "{", ' "a": "%s"', "}"),
        ("csv", "key,value\n", "a,%s\n", ""),
    ],
)
def test_a_record_at_the_limit_is_read_one_more_is_refused(
    tmp_path: Path, fmt: str, before: str, record: str, after: str
) -> None:
    at_limit = record % ("v" * 500)
    source = _written(tmp_path, before + at_limit + after)
    limit = len(at_limit)
    assert read_records(source, fmt, limit) == [Record("a", b"v" * 500)]  # type: ignore[arg-type]
    with pytest.raises(click.UsageError, match=f"longer than {limit - 1} characters"):
        read_records(source, fmt, limit - 1)  # type: ignore[arg-type]


def test_the_whole_input_may_be_far_longer_than_a_record(tmp_path: Path) -> None:
    records = [{"key": f"k{n}", "value": "v" * 50} for n in range(2000)]
    source = _written(tmp_path, json.dumps(records))
    assert len(read_records(source, "json", 100)) == 2000


def test_a_csv_row_of_many_quoted_lines_is_one_record(tmp_path: Path) -> None:
    """Lines do not reset the bound: the row they make up is the record."""
    row = "a," + ",".join(['"x\ny"'] * 50)
    source = _written(tmp_path, "key," + ",".join(f"c{n}" for n in range(50)) + "\n" + row + "\n")
    with pytest.raises(click.UsageError, match="longer than 200 characters"):
        read_records(source, "csv", 200)


_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=300)
_RECORDS = st.lists(
    st.fixed_dictionaries(
        {"key": st.from_regex(r"[a-z]{1,8}", fullmatch=True), "value": _TEXT},
        optional={"ttl": st.integers(1, 10**12), "revision": st.integers(0, 10**12)},
    ),
    max_size=40,
    unique_by=lambda record: record["key"],
)


@settings(max_examples=60, deadline=None)
@given(records=_RECORDS, indent=st.sampled_from([None, 0, 3]), pad=st.integers(0, 70_000))
def test_json_read_value_by_value_gives_json_loads_records(
    tmp_path_factory: pytest.TempPathFactory,
    records: list[dict[str, object]],
    indent: int | None,
    pad: int,
) -> None:
    """Whitespace before the array moves every value across the 64 KiB reads."""
    text = " " * pad + json.dumps(records, indent=indent, ensure_ascii=indent is None)
    source = _written(tmp_path_factory.mktemp("json"), text)
    expected = [
        Record(
            str(r["key"]),
            str(r["value"]).encode(),
            None if "ttl" not in r else str(r["ttl"]),
            r.get("revision"),  # type: ignore[arg-type]
        )
        for r in json.loads(text)
    ]
    assert read_records(source, "json", 1 << 20) == expected
