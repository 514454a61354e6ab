"""Object store models: ObjectInfo as stored in meta messages (the JSON nats.go and nats-py
write), the store configuration and status, and the ``OBJ_<store>`` stream layout."""

from __future__ import annotations

import base64
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Literal

import msgspec

from jetstream import Duration, StreamConfig, StreamInfo
from jetstream._protocol.bucket_config import check_stream_limits
from jetstream._protocol.message import parse_timestamp
from jetstream._protocol.text import decode_json
from jetstream._summary import mapping_text, size_text, stream_rows, summary, text, time_text

from ._errors import InvalidObjectMetaError

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "ObjectInfo",
    "ObjectLink",
    "ObjectMetaOptions",
    "StoreConfig",
    "StoreStatus",
    "chunk_subject",
    "meta_subject",
    "store_config_from_stream",
    "stream_config_for_store",
    "stream_name",
]

DEFAULT_CHUNK_SIZE = 128 * 1024
"""Chunk size of every NATS object store client."""


class ObjectLink(msgspec.Struct, omit_defaults=True):
    """A link to an object (``name`` set) or to a whole store (``name`` empty)."""

    bucket: str
    name: str = ""


class ObjectMetaOptions(msgspec.Struct, omit_defaults=True):
    """The ``options`` of a meta record (ADR-20): the ``link`` a link record points to, and
    the ``max_chunk_size`` the writer used."""

    link: ObjectLink | None = None
    max_chunk_size: int = 0


class ObjectInfo(msgspec.Struct, omit_defaults=True, kw_only=True):
    """An object's meta record, as nats.go's ``ObjectInfo`` JSON.

    ``digest`` is ``SHA-256=<base64url>``. ``expired`` is ours and never stored:
    :meth:`ObjectStore.watch` sets it for objects whose TTL ran out.
    """

    name: str
    bucket: str
    nuid: str
    size: int
    mtime: datetime | None
    """When the writer stored the record, by its clock: an aware UTC datetime (to the
    microsecond; nats.go writes nanoseconds), or None when the record holds no time it can
    read (nats-py's deleted objects ``""``, nats.js links none, nats.go's zero time
    ``0001-01-01T00:00:00Z``, text that is no RFC 3339 time). On the wire it stays RFC 3339
    text; we write it in UTC (``Z``), and None as nats.go's zero time."""
    chunks: int
    digest: str = ""
    deleted: bool = False
    description: str = ""
    headers: dict[str, list[str]] | None = None
    metadata: dict[str, str] | None = None
    options: ObjectMetaOptions | None = None
    expired: bool = False

    @property
    def is_link(self) -> bool:
        return self.options is not None and self.options.link is not None

    @property
    def link(self) -> ObjectLink | None:
        return self.options.link if self.options is not None else None

    def __str__(self) -> str:
        """A short summary, as ``nats obj info`` prints one (``repr()`` has every field)."""
        where = f"{text(self.name)} in store {text(self.bucket)}"
        link = self.link
        if link is not None:
            target = f"{text(link.bucket)}/{text(link.name)}" if link.name else text(link.bucket)
            return summary(
                f"Link {where}", [("target", target), ("modified", time_text(self.mtime))]
            )
        status = "expired" if self.expired else "deleted" if self.deleted else None
        chunks = f"{self.chunks} chunk{'' if self.chunks == 1 else 's'}"
        return summary(
            f"Object {where}",
            [
                ("status", status),
                ("size", f"{size_text(self.size)} in {chunks}"),
                ("modified", time_text(self.mtime)),
                ("digest", text(self.digest) if self.digest else None),
                ("description", text(self.description) if self.description else None),
                ("metadata", mapping_text(self.metadata)),
            ],
        )


class _WireLink(msgspec.Struct):
    bucket: str | None = None
    name: str | None = None


class _WireOptions(msgspec.Struct):
    link: _WireLink | None = None
    max_chunk_size: int | None = None


class _WireInfo(msgspec.Struct):
    """A meta record as any ADR-20 writer leaves it: every field may be omitted or null (nats.js
    link records carry only ``name``, ``bucket`` and ``options``; nats-py drops None fields)."""

    name: str | None = None
    bucket: str | None = None
    nuid: str | None = None
    size: int | None = None
    mtime: str | None = None
    chunks: int | None = None
    digest: str | None = None
    deleted: bool | None = None
    description: str | None = None
    headers: dict[str, list[str]] | None = None
    metadata: dict[str, str] | None = None
    options: _WireOptions | None = None


_encode_info = msgspec.json.Encoder().encode
_decode_wire = msgspec.json.Decoder(_WireInfo).decode


_NO_TIME = "0001-01-01T00:00:00Z"
"""Go's zero ``time.Time``: what nats.go writes for a record without a time."""
_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)


def encode_info(info: ObjectInfo) -> bytes:
    """The meta record's JSON, ``mtime`` as RFC 3339 UTC text (``Z``; None as Go's zero time,
    which every ADR-20 reader parses)."""
    record = msgspec.to_builtins(info)
    mtime = info.mtime
    record["mtime"] = (
        _NO_TIME if mtime is None else mtime.astimezone(UTC).isoformat().replace("+00:00", "Z")
    )
    return _encode_info(record)


def _time_of(written: str | None) -> datetime | None:
    """A record's ``mtime`` text as aware UTC, or None for no time or one that does not read
    (a listing never fails on a peer's clock)."""
    if not written:
        return None
    try:
        parsed = parse_timestamp(written)
    except (ValueError, OverflowError):  # OverflowError: before year 1 or after 9999 in UTC
        return None
    return None if parsed == _ZERO_TIME else parsed


def decode_info(data: bytes, *, name: str = "", bucket: str = "") -> ObjectInfo:
    """Decode a meta record tolerantly: what a writer omitted (or wrote as null) takes its
    default; ``name``/``bucket`` (from the subject and the store) stand in for missing ones.

    Raises:
        InvalidObjectMetaError: not a JSON object, a field of the wrong type, or nested too
            deep to decode.
    """
    try:
        wire = decode_json(_decode_wire, data)
    # RecursionError: a peer's record nesting (unknown) fields deeper than the recursion limit.
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise InvalidObjectMetaError(f"unreadable meta record of {name!r}: {exc}") from exc
    return ObjectInfo(
        name=wire.name or name,
        bucket=wire.bucket or bucket,
        nuid=wire.nuid or "",
        size=wire.size or 0,
        mtime=_time_of(wire.mtime),
        chunks=wire.chunks or 0,
        digest=wire.digest or "",
        deleted=bool(wire.deleted),
        description=wire.description or "",
        headers=wire.headers,
        metadata=wire.metadata,
        options=_options_of(wire.options),
    )


def _options_of(wire: _WireOptions | None) -> ObjectMetaOptions | None:
    if wire is None:
        return None
    link = wire.link
    return ObjectMetaOptions(
        link=None if link is None else ObjectLink(bucket=link.bucket or "", name=link.name or ""),
        max_chunk_size=wire.max_chunk_size or 0,
    )


def stream_name(store: str) -> str:
    """``OBJ_<store>``."""
    return f"OBJ_{store}"


def chunk_subject(store: str, nuid: str) -> str:
    """``$O.<store>.C.<nuid>``: where an object's chunks live."""
    return f"$O.{store}.C.{nuid}"


def meta_subject(store: str, name: str) -> str:
    """``$O.<store>.M.<base64url(name)>`` (padded, as nats.go and nats-py encode it)."""
    return f"$O.{store}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"


def name_from_meta_subject(subject: str) -> str:
    """The object name a meta subject encodes (padding optional); a token that is not
    base64url of UTF-8 (a peer's oddity) names itself rather than failing a listing."""
    token = subject.rsplit(".", 1)[1]
    try:
        padded = token + "=" * (-len(token) % 4)
        return base64.b64decode(padded, altchars=b"-_", validate=True).decode()
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        return token


@dataclasses.dataclass(frozen=True, kw_only=True)
class StoreConfig:
    """Configuration of an object store; raises ``InvalidBucketConfigError`` when out of range."""

    description: str = ""
    max_age: timedelta | None = None
    """Lifetime of every object (None = forever); per-object TTLs can be shorter. Seconds, a
    ``timedelta`` or a duration string (``"30d"``) are accepted, stored as a ``timedelta``."""
    marker_ttl: timedelta | None = None
    """Opt-in, off by default. When set, the server leaves an empty "expired" marker on an
    object's meta subject when its TTL runs out (for this long), so :meth:`ObjectStore.watch`
    reports expiries. Trade-off: ADR-20 clients (nats.js, nats-py, nats.go) cannot parse that
    empty record, and their ``info``/``get``/``put`` of that name fail until the marker
    expires; ours read it as a deleted object. Per-object TTLs must be at least this long."""
    max_bytes: int = -1
    storage: Literal["file", "memory"] = "file"
    replicas: int = 1
    compression: bool = False
    metadata: dict[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        check_stream_limits(self)


@dataclasses.dataclass(frozen=True)
class StoreStatus:
    """A store's configuration, size and state."""

    store: str
    size: int
    """Bytes stored (chunks and meta)."""
    sealed: bool
    config: StoreConfig
    stream_info: StreamInfo

    def __str__(self) -> str:
        """A short summary, as ``nats obj status`` prints one (``repr()`` has every field)."""
        return summary(
            f"Object store {text(self.store)}",
            [
                ("size", size_text(self.size)),
                ("sealed", "yes" if self.sealed else "no"),
                *stream_rows(self.config, self.stream_info),
            ],
        )


def _plain(value: timedelta | None) -> timedelta | None:
    """A wire duration as a plain ``timedelta`` (the config's type)."""
    return None if value is None else timedelta(seconds=value.total_seconds())


def stream_config_for_store(
    store: str, config: StoreConfig, *, allow_batched: bool
) -> StreamConfig:
    """The NATS object store stream, plus fast ingest and per-message TTL."""
    return StreamConfig(
        name=stream_name(store),
        description=config.description,
        subjects=[f"$O.{store}.C.>", f"$O.{store}.M.>"],
        max_age=Duration.of(config.max_age),
        max_bytes=config.max_bytes,
        storage=config.storage,
        num_replicas=config.replicas,
        discard="new",
        allow_rollup_hdrs=True,
        allow_direct=True,
        compression="s2" if config.compression else "none",
        metadata=dict(config.metadata) or None,
        allow_msg_ttl=True,
        subject_delete_marker_ttl=Duration.of(config.marker_ttl),
        allow_batched=allow_batched,
    )


def store_config_from_stream(config: StreamConfig) -> StoreConfig:
    return StoreConfig(
        description=config.description,
        max_age=_plain(config.max_age),
        marker_ttl=_plain(config.subject_delete_marker_ttl),
        max_bytes=config.max_bytes if config.max_bytes > 0 else -1,
        storage=config.storage,
        replicas=max(1, config.num_replicas),
        compression=config.compression == "s2",
        metadata={k: v for k, v in (config.metadata or {}).items() if not k.startswith("_nats.")},
    )
