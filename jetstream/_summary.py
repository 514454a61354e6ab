"""Short multi-line summaries that status and info objects print as their ``str()``, the way
``nats kv status`` shows a bucket: a title, then one right-aligned ``label: value`` line each.
(Their ``repr()`` stays the precise dataclass or msgspec one.)"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Protocol

from ._protocol.bucket_config import StreamLimits
from ._protocol.models import StreamInfo

__all__ = [
    "StreamSettings",
    "duration_text",
    "limit_text",
    "mapping_text",
    "placement_text",
    "size_text",
    "stream_rows",
    "summary",
    "text",
    "time_text",
]

_UNITS = ((86400, "d"), (3600, "h"), (60, "m"), (1, "s"))


def summary(title: str, rows: Iterable[tuple[str, object]]) -> str:
    """``title``, then each ``(label, value)`` as an indented line, labels right-aligned;
    rows whose value is None are left out."""
    shown = [(label, str(value)) for label, value in rows if value is not None]
    width = max((len(label) for label, _ in shown), default=0)
    return "\n".join([title, *(f"  {label:>{width}}: {value}" for label, value in shown)])


def text(value: str) -> str:
    """Stored text as it is when printable, else quoted with its escapes (a name or
    description another client wrote may hold control characters that would drive the
    terminal)."""
    return value if value.isprintable() else repr(value)


def mapping_text(values: dict[str, str] | None) -> str | None:
    """``k=v, k2=v2`` (texts as :func:`text`); None when empty."""
    return ", ".join(f"{text(k)}={text(v)}" for k, v in values.items()) if values else None


def duration_text(value: timedelta | None, none: str = "unlimited") -> str:
    """``1d2h``, ``90s`` as ``1m30s``, ``0.5s``; ``none`` for None."""
    if value is None:
        return none
    seconds = value.total_seconds()
    if seconds != int(seconds) or seconds <= 0:
        return f"{seconds:g}s"
    left, parts = int(seconds), []
    for size, unit in _UNITS:
        if left >= size:
            parts.append(f"{left // size}{unit}")
            left %= size
    return "".join(parts)


def size_text(count: int) -> str:
    """Bytes as ``512 B``, ``1.5 KiB``, ``3.0 MiB``, ... (binary units, as the nats CLI)."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{count} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def limit_text(count: int) -> str:
    """A byte limit: ``unlimited`` for a negative one (the server's -1)."""
    return "unlimited" if count < 0 else size_text(count)


def placement_text(storage: str, replicas: int) -> str:
    """``file, 1 replica``; ``memory, 3 replicas``."""
    return f"{storage}, {replicas} replica{'' if replicas == 1 else 's'}"


def time_text(value: datetime | None) -> str | None:
    """An aware time as ``2026-11-23 16:54:44 UTC`` (None stays None)."""
    return None if value is None else f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


class StreamSettings(StreamLimits, Protocol):
    """What buckets and stores configure alike (``BucketConfig`` and ``StoreConfig``)."""

    @property
    def compression(self) -> bool: ...
    @property
    def description(self) -> str: ...


def stream_rows(config: StreamSettings, info: StreamInfo) -> list[tuple[str, object]]:
    """The rows a bucket's and a store's summaries share: limits, placement, text, stream."""
    return [
        ("max age", duration_text(config.max_age)),
        ("marker TTL", duration_text(config.marker_ttl, none="off")),
        ("max bytes", limit_text(config.max_bytes)),
        ("storage", placement_text(config.storage, config.replicas)),
        ("compression", "on" if config.compression else "off"),
        ("description", text(config.description) if config.description else None),
        ("metadata", mapping_text(config.metadata)),
        ("stream", text(info.config.name)),
        ("created", time_text(info.created)),
    ]
