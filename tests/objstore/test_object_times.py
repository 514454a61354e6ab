"""``ObjectInfo.mtime`` is an aware UTC datetime (or None) whoever wrote the record: what each
writer's text becomes (nats.go's nanoseconds and zero time, nats.js's milliseconds, nats-py's
offsets and emptied deletes, a missing or unreadable time), and the text we write for it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

import objstore
from objstore._models import decode_info, encode_info

_RECORD = {"name": "o", "bucket": "s", "nuid": "n", "size": 1, "chunks": 1}
_MISSING = object()


def _read(mtime: object) -> datetime | None:
    record = dict(_RECORD) if mtime is _MISSING else {**_RECORD, "mtime": mtime}
    return decode_info(json.dumps(record).encode()).mtime


@pytest.mark.parametrize(
    ("written", "read"),
    [
        # nats.go: RFC 3339 with nanoseconds; Python keeps microseconds
        ("2025-01-01T00:00:00.123456789Z", datetime(2025, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)),
        ("2025-01-01T00:00:00.000Z", datetime(2025, 1, 1, tzinfo=UTC)),  # nats.js
        # nats-py: isoformat() with an offset; read as the same instant in UTC
        ("2025-01-01T01:00:00.5+01:00", datetime(2025, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)),
        ("2025-01-01T00:00:00", datetime(2025, 1, 1, tzinfo=UTC)),  # no zone: UTC
        ("0001-01-01T00:00:00Z", None),  # nats.go's zero time: no time recorded
        ("", None),  # nats-py's delete()
        (None, None),  # null
        (_MISSING, None),  # nats.js link()
        ("yesterday", None),  # unreadable: the object still reads
        ("2016-12-31T23:59:60Z", None),  # a leap second: no datetime holds it
        ("0001-01-01T00:00:00+01:00", None),  # before year 1 in UTC
        ("9999-12-31T23:59:59-01:00", None),  # after year 9999 in UTC
    ],
)
def test_each_writers_time_reads_as_an_aware_utc_datetime_or_none(
    written: object, read: datetime | None
) -> None:
    mtime = _read(written)
    assert mtime == read
    if mtime is not None:
        assert mtime.tzinfo is UTC


@pytest.mark.parametrize(
    ("mtime", "text"),
    [
        (datetime(2025, 1, 1, 0, 0, 0, 123456, tzinfo=UTC), "2025-01-01T00:00:00.123456Z"),
        (datetime(2025, 1, 1, tzinfo=UTC), "2025-01-01T00:00:00Z"),
        (datetime(2025, 1, 1, 2, tzinfo=timezone(timedelta(hours=2))), "2025-01-01T00:00:00Z"),
        (None, "0001-01-01T00:00:00Z"),  # what every ADR-20 reader parses (nats.go: zero time)
    ],
)
def test_we_write_rfc3339_utc_and_read_back_what_we_wrote(
    mtime: datetime | None, text: str
) -> None:
    info = objstore.ObjectInfo(name="o", bucket="s", nuid="n", size=1, chunks=1, mtime=mtime)
    data = encode_info(info)
    assert json.loads(data)["mtime"] == text
    assert decode_info(data) == info
