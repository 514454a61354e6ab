"""The JSON shapes of ``--json`` output. Field names are a stable interface (docs/CLI.md):
add fields, never rename or remove one.

Times are ISO 8601 in UTC; durations and TTLs are whole or fractional seconds (``null`` = none;
a TTL of ``-1`` = never expires); sizes are bytes.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

import kvstore
import objstore

from ._shown import text_of

__all__ = [
    "bucket_fields",
    "entry_fields",
    "object_fields",
    "seconds",
    "store_fields",
    "timestamp",
]


def seconds(value: timedelta | None) -> float | int | None:
    """A duration as seconds (an int when whole)."""
    if value is None:
        return None
    total = value.total_seconds()
    return int(total) if total.is_integer() else total


def timestamp(value: datetime | None) -> str | None:
    """An aware datetime as ISO 8601 UTC (``2026-11-23T16:54:44.123456Z``)."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def entry_fields(entry: kvstore.Entry) -> dict[str, Any]:
    """One KV revision: ``bucket key revision op created ttl size value value_base64``
    (``value`` is the text when the bytes are UTF-8, else null; ``op`` is PUT, DEL, PURGE or
    EXPIRED)."""
    return {
        "bucket": entry.bucket,
        "key": entry.key,
        "revision": entry.revision,
        "op": entry.op.value,
        "created": timestamp(entry.created),
        "ttl": entry.ttl,
        "size": len(entry.value),
        "value": text_of(entry.value),
        "value_base64": base64.b64encode(entry.value).decode(),
    }


def bucket_fields(status: kvstore.BucketStatus) -> dict[str, Any]:
    """A bucket's configuration and size."""
    config = status.config
    return {
        "bucket": status.bucket,
        "values": status.values,
        "bytes": status.bytes,
        "history": config.history,
        "max_age": seconds(config.max_age),
        "marker_ttl": seconds(config.marker_ttl),
        "max_value_size": config.max_value_size,
        "max_bytes": config.max_bytes,
        "storage": config.storage,
        "replicas": config.replicas,
        "compression": config.compression,
        "description": config.description,
        "metadata": dict(config.metadata),
    }


def object_fields(info: objstore.ObjectInfo) -> dict[str, Any]:
    """An object's meta record (``link`` is ``{"store", "name"}`` for links, else null;
    ``name`` of a link to a whole store is "")."""
    link = info.link
    return {
        "store": info.bucket,
        "name": info.name,
        "size": info.size,
        "chunks": info.chunks,
        "digest": info.digest,
        "modified": timestamp(info.mtime),
        "deleted": info.deleted,
        "expired": info.expired,
        "description": info.description,
        "metadata": dict(info.metadata or {}),
        "link": None if link is None else {"store": link.bucket, "name": link.name},
    }


def store_fields(status: objstore.StoreStatus) -> dict[str, Any]:
    """A store's configuration and size."""
    config = status.config
    return {
        "store": status.store,
        "size": status.size,
        "sealed": status.sealed,
        "max_age": seconds(config.max_age),
        "marker_ttl": seconds(config.marker_ttl),
        "max_bytes": config.max_bytes,
        "storage": config.storage,
        "replicas": config.replicas,
        "compression": config.compression,
        "description": config.description,
        "metadata": dict(config.metadata),
    }
