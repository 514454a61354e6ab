"""``print(await bucket.status())`` printed 1,600 characters on one line: its ``str()`` is a
short summary as ``nats kv status`` prints it, its ``repr()`` stays precise."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import msgspec

import jetstream
import kvstore


async def test_a_bucket_status_prints_as_a_short_summary(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("status")
    bucket = await kvstore.create_bucket(
        js,
        name,
        history=5,
        max_age=timedelta(days=1),
        marker_ttl=timedelta(seconds=30),
        description="people\x1b[2J",
        metadata={"team": "crm"},
    )
    status = await bucket.status()
    created = datetime(2026, 11, 23, 16, 54, 44, 123456, tzinfo=UTC)
    info = msgspec.structs.replace(status.stream_info, created=created)
    status = dataclasses.replace(status, values=3, bytes=1536, stream_info=info)
    assert str(status) == "\n".join(
        [
            f"KV bucket {name}",
            "       values: 3",
            "         size: 1.5 KiB",
            "      history: 5",
            "    max value: unlimited",
            "      max age: 1d",
            "   marker TTL: 30s",
            "    max bytes: unlimited",
            "      storage: file, 1 replica",
            "  compression: off",
            "  description: 'people\\x1b[2J'",
            "     metadata: team=crm",
            f"       stream: KV_{name}",
            "      created: 2026-11-23 16:54:44 UTC",
        ]
    )
    assert repr(status).startswith(f"BucketStatus(bucket='{name}', values=3, bytes=1536, ")
    await kvstore.delete_bucket(js, name)
