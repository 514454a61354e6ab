"""``kv put-many`` input that is malformed or large: a file or stdin that is not UTF-8 or nests
deeper than the parser goes is a usage error (exit 2, one line, no traceback); a value the
server cannot take stores nothing; CSV fields as large as the server's values are read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import jetstream
import kvstore
from tests.cli.cli_helpers import (
    assert_no_traceback,
    jetstore,
)
from tests.conftest import BucketFactory

pytestmark = pytest.mark.integration


async def test_put_many_non_utf8_file_is_a_usage_error(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """A JSON file saved as UTF-16 (or any non-UTF-8 bytes) is bad input: exit 2, one line,
    not a raw UnicodeDecodeError traceback with exit 1."""
    bucket = await make_bucket()
    source = tmp_path / "records.json"
    source.write_bytes('{"a": "b"}'.encode("utf-16"))
    run = jetstore("kv", "put-many", bucket.name, str(source), "-s", nats_server.url)
    assert_no_traceback(run.err)
    assert run.code == 2, run.err
    assert run.err.startswith("jetstore: "), run.err


async def test_put_many_non_utf8_stdin_is_a_usage_error(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer
) -> None:
    bucket = await make_bucket()
    run = jetstore(
        "kv",
        "put-many",
        bucket.name,
        "-",
        "--format",
        "jsonl",
        "-s",
        nats_server.url,
        stdin=b'{"key": "a", "value": "\xff"}\n',
    )
    assert_no_traceback(run.err)
    assert run.code == 2, run.err


async def test_put_many_deeply_nested_json_is_a_usage_error(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """Malformed input (nesting deeper than the parser handles) is a usage error, not a
    RecursionError traceback."""
    bucket = await make_bucket()
    source = tmp_path / "deep.json"
    source.write_text("[" * 100_000 + "]" * 100_000)
    run = jetstore("kv", "put-many", bucket.name, str(source), "-s", nats_server.url)
    assert_no_traceback(run.err)
    assert run.code == 2, run.err


async def test_put_many_value_over_max_payload_stores_nothing(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """docs/CLI.md: "Every record, key and TTL is checked before the first batch is sent
    (exit 2, nothing stored)". A record whose value cannot fit the server's max_payload is
    only found when its batch is sent: the earlier batches are already stored, yet the exit
    code is 2 ("nothing was sent (nothing written)")."""
    bucket = await make_bucket()
    source = tmp_path / "records.json"
    source.write_text(
        json.dumps(
            [
                {"key": "first", "value": "small"},
                {"key": "second", "value": "x" * (2 * 1024 * 1024)},  # > 1 MiB max_payload
            ]
        )
    )
    run = jetstore(
        "kv", "put-many", bucket.name, str(source), "--batch-size", "1", "-s", nats_server.url
    )
    assert run.code == 2, run.err
    with pytest.raises(kvstore.KeyNotFoundError):
        await bucket.get("first")  # exit 2 promises nothing was written


async def test_put_many_csv_takes_values_larger_than_csv_s_default_field_limit(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """csv stops at 128 KiB fields ("_csv.Error: field larger than field limit"), below the
    values a server takes (1 MiB here): such a CSV record is stored like a JSON one."""
    bucket = await make_bucket()
    source = tmp_path / "records.csv"
    big = "x" * (200 * 1024)
    source.write_text(f"key,value\nbig,{big}\nsmall,v\n")
    run = jetstore("kv", "put-many", bucket.name, str(source), "-s", nats_server.url)
    assert_no_traceback(run.err)
    assert run.code == 0, run.err
    assert (await bucket.get("big")).value == big.encode()
