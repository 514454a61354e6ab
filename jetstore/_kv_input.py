"""What a ``kv`` write stores, read no further than the largest value it can hold: ``put``,
``create`` and ``update`` read a value from a file or stdin up to the bucket's limit plus one
byte (once the bucket is open), ``put-many`` each record up to what a value of the server's
``max_payload`` can take written out (once connected; the whole input may be larger). Both
before anything is sent."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

import jetstream
import kvstore

from ._input import STDIN, in_thread, read_at_most, refuse_closed_stdin
from ._records import Format, Record, read_records

__all__ = ["read_put_many_records", "read_value", "value_source"]

_ESCAPED = 6
"""Characters a value's byte can take in JSON input at most (``\\u0000``)."""

_RECORD_ROOM = 64 * 1024
"""Characters a record may hold besides its value: its key, TTL, revision, names, spacing."""


def _value_limit(bucket: kvstore.Bucket) -> tuple[int, str]:
    """The most bytes a value may have in ``bucket`` on this connection, and what sets it
    (the bucket's ``max_value_size`` or the server's ``max_payload``)."""
    max_payload = bucket.js.nc.max_payload
    own = bucket.config.max_value_size
    if 0 < own <= max_payload:
        return own, f"the max_value_size of bucket {bucket.name!r}"
    return max_payload, "the server's max_payload"


def value_source(value: str | None, file: Path | None) -> bytes | str:
    """Where the value of a write comes from, checked before connecting: the argument's bytes
    (as the shell passed them), or the path to read (``-``: stdin).

    Raises:
        click.UsageError: both an argument and ``--file``; no argument with stdin a terminal
            or closed.
    """
    if value is not None and file is not None:
        raise click.UsageError("give the value as an argument or with --file, not both")
    if file is not None:
        return str(file)
    if value is not None and value != STDIN:
        return os.fsencode(value)  # the argument's own bytes, UTF-8 or not
    if value is None and sys.stdin is not None and sys.stdin.isatty():
        raise click.UsageError("no value: give it as an argument, with --file, or on stdin")
    return refuse_closed_stdin(STDIN)


async def read_value(bucket: kvstore.Bucket, source: bytes | str) -> bytes:
    """The value to write: the argument, or at most the bucket's limit of the file or stdin.

    Raises:
        ValueTooLargeError: the input holds more than the bucket takes (nothing is written).
        click.UsageError: the file cannot be read.
    """
    if isinstance(source, bytes):
        return source  # the library checks its size
    limit, reason = _value_limit(bucket)
    where = "stdin" if source == STDIN else repr(source)
    try:
        data = await in_thread(read_at_most, source, limit + 1)
    except OSError as exc:
        raise click.UsageError(f"cannot read {where}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise kvstore.ValueTooLargeError(
            f"the value in {where} is larger than {limit} bytes, {reason}; nothing was written"
        )
    return data


async def read_put_many_records(js: jetstream.JetStream, path: str, fmt: Format) -> list[Record]:
    """``put-many``'s records from ``path`` (``-``: stdin), each refused as soon as it is
    longer than the largest value the server takes could be written (six characters a byte,
    plus room for its key and fields): an input that never ends a record (``/dev/zero``) is
    not read whole. Read before the bucket is opened, so that a missing bucket does not hide
    bad input; the bucket's own limit is checked per value before anything is sent.

    Raises:
        click.UsageError: unreadable or malformed input, or a record that long.
    """
    limit = _ESCAPED * js.nc.max_payload + _RECORD_ROOM
    return await in_thread(read_records, path, fmt, limit)
