"""KV models: operations, entries, bucket configuration and status, and the mapping between a
bucket configuration and its ``KV_<bucket>`` stream (the NATS KV layout, so every NATS client
can use the same bucket)."""

from __future__ import annotations

import dataclasses
import enum
from datetime import datetime, timedelta
from typing import Final, Literal

import msgspec

from jetstream import Duration, InvalidBucketConfigError, StreamConfig, StreamInfo
from jetstream import headers as hdr
from jetstream._crypto.hidden_payload import PayloadHidden
from jetstream._protocol.bucket_config import check_size, check_stream_limits, validate_bucket_name
from jetstream._protocol.message import time_of_ns
from jetstream._summary import limit_text, size_text, stream_rows, summary, text

from ._name_codec import NEW_NAME_FORMAT

__all__ = [
    "MAX_HISTORY",
    "BucketConfig",
    "BucketStatus",
    "Entry",
    "Op",
    "bucket_config_from_stream",
    "name_format_of",
    "op_from_headers",
    "stream_config_for_bucket",
    "stream_name",
    "subject_prefix",
]

MAX_HISTORY: Final = 64
_NS = 1_000_000_000
_DEFAULT_DUPLICATE_WINDOW = timedelta(minutes=2)
_SERVER_METADATA_PREFIX = "_nats."  # keys the server sets in stream metadata
_MAX_VALUE_KEY = "jetstore.max_value_size"
_NAME_FORMAT_KEY = "jetstore.key_name_format"  # see _name_codec.py
_RESERVED_KEYS = (_MAX_VALUE_KEY, _NAME_FORMAT_KEY)
HEADER_ROOM = 1024
"""Bytes the stream's ``max_msg_size`` allows beyond ``max_value_size``: the server counts
headers (TTL, CAS, message id, batch headers) in that limit; the client checks the value."""


class Op(enum.Enum):
    """What a KV entry records."""

    PUT = "PUT"
    """A value."""
    DELETE = "DEL"
    """A delete tombstone (``KV-Operation: DEL``); earlier revisions stay in the history."""
    PURGE = "PURGE"
    """A purge tombstone (``KV-Operation: PURGE``); earlier revisions were removed."""
    EXPIRED = "EXPIRED"
    """A server marker (``Nats-Marker-Reason: MaxAge``): the value's TTL or the bucket's
    max_age removed it. Other clients show this as a purge; we keep it distinct."""


def op_from_headers(headers: dict[str, str] | None) -> Op:
    """The operation a stored message represents. ``KV-Operation`` wins over a marker reason;
    ``Remove``/``Purge`` marker reasons (defined by ADR-43, not yet sent by servers) map like
    nats.go does."""
    if not headers:
        return Op.PUT
    operation = headers.get(hdr.KV_OPERATION)
    if operation == hdr.KV_OPERATION_DELETE:
        return Op.DELETE
    if operation == hdr.KV_OPERATION_PURGE:
        return Op.PURGE
    reason = headers.get(hdr.MARKER_REASON)
    if reason == "MaxAge":
        return Op.EXPIRED
    if reason == "Purge":
        return Op.PURGE
    if reason == "Remove":
        return Op.DELETE
    return Op.PUT


class Entry(PayloadHidden, msgspec.Struct, frozen=True):
    """One revision of a key.

    ``revision`` is the stream sequence, ``created_ns`` the server's time of the write in
    nanoseconds since the epoch (every digit the server stored) and :attr:`created` the same as
    an aware UTC datetime, made when read (a watch builds none for the entries nobody asks),
    ``delta`` how many newer revisions follow when known (watchers), ``ttl`` the revision's
    ``Nats-TTL`` in seconds (``-1`` = never) when it has one. ``value`` is empty for
    tombstones and markers. The repr shows the value's size, never its bytes (they may be a
    secret: logging an entry must not copy it into the log).
    """

    bucket: str
    key: str
    value: bytes
    revision: int
    created_ns: int
    op: Op = Op.PUT
    delta: int | None = None
    ttl: int | None = None

    _payload = "value"

    @property
    def created(self) -> datetime:
        """:attr:`created_ns` as an aware UTC datetime (truncated to microseconds)."""
        return time_of_ns(self.created_ns)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BucketConfig:
    """Configuration of a KV bucket; every field has the NATS KV default.

    Raises ``InvalidBucketConfigError`` (a ``ValueError``) on construction when a value is out
    of range.
    """

    history: int = 1
    """Revisions kept per key, 1..64."""
    max_age: timedelta | None = None
    """Bucket-wide lifetime of every revision (None = forever). Seconds, a ``timedelta`` or a
    duration string (``"1h"``, ``"30d"``) are accepted and stored as a ``timedelta``."""
    marker_ttl: timedelta | None = None
    """When set, the server leaves a marker (seen as ``Op.EXPIRED``) when a key expires, for
    this long (>= 1 s; seconds, ``timedelta`` or a string). Without it expiry is silent: the
    key just disappears."""
    max_value_size: int = -1
    """Largest value in bytes (-1 = the server's max payload), checked before sending. The
    stream's ``max_msg_size`` is set ``HEADER_ROOM`` bytes higher because the server counts
    headers in it (the exact value is kept in the stream's metadata)."""
    max_bytes: int = -1
    """Largest bucket size in bytes (-1 = unlimited); writes beyond it are refused."""
    storage: Literal["file", "memory"] = "file"
    replicas: int = 1
    """Stream replicas, 1..5 (a cluster is needed above 1)."""
    compression: bool = False
    """S2-compress the stored messages."""
    description: str = ""
    metadata: dict[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.history, bool) or not isinstance(self.history, int):
            raise InvalidBucketConfigError(f"history must be an int, not {self.history!r}")
        if not 1 <= self.history <= MAX_HISTORY:
            raise InvalidBucketConfigError(f"history must be 1..{MAX_HISTORY}: {self.history}")
        check_size("max_value_size", self.max_value_size)
        check_stream_limits(self)
        for reserved in _RESERVED_KEYS:
            if reserved in self.metadata:
                raise InvalidBucketConfigError(f"metadata key {reserved!r} is reserved")


@dataclasses.dataclass(frozen=True)
class BucketStatus:
    """A bucket's configuration and current size."""

    bucket: str
    values: int
    """Stored messages: live values, history, tombstones and markers."""
    bytes: int
    config: BucketConfig
    stream_info: StreamInfo

    @property
    def history(self) -> int:
        return self.config.history

    @property
    def max_age(self) -> timedelta | None:
        return self.config.max_age

    @property
    def marker_ttl(self) -> timedelta | None:
        return self.config.marker_ttl

    def __str__(self) -> str:
        """A short summary, as ``nats kv status`` prints one (``repr()`` has every field)."""
        config = self.config
        return summary(
            f"KV bucket {text(self.bucket)}",
            [
                ("values", self.values),
                ("size", size_text(self.bytes)),
                ("history", config.history),
                ("max value", limit_text(config.max_value_size)),
                *stream_rows(config, self.stream_info),
            ],
        )


def stream_name(bucket: str) -> str:
    """``KV_<bucket>``."""
    return f"KV_{bucket}"


def subject_prefix(bucket: str) -> str:
    """``$KV.<bucket>.``: a key's subject is this plus the key."""
    return f"$KV.{bucket}."


def _plain(value: timedelta | None) -> timedelta | None:
    """A wire duration as a plain ``timedelta`` (the configs' type)."""
    return None if value is None else timedelta(seconds=value.total_seconds())


def stream_config_for_bucket(
    bucket: str,
    config: BucketConfig,
    *,
    allow_atomic: bool,
    name_format: str | None = NEW_NAME_FORMAT,
) -> StreamConfig:
    """The stream behind a bucket: the usual NATS KV shape plus per-message TTL and atomic
    batches; ``name_format`` is recorded in its metadata (None: no record, as a bucket made
    before names were bound to their bucket).

    Raises:
        InvalidBucketNameError: the bucket name breaks the naming rules.
    """
    validate_bucket_name(bucket)
    duplicate_window = _DEFAULT_DUPLICATE_WINDOW
    if config.max_age is not None and timedelta(0) < config.max_age < duplicate_window:
        duplicate_window = config.max_age  # the server refuses a window longer than max_age
    return StreamConfig(
        name=stream_name(bucket),
        description=config.description,
        subjects=[f"{subject_prefix(bucket)}>"],
        max_msgs_per_subject=config.history,
        max_bytes=config.max_bytes,
        max_age=Duration.of(config.max_age),
        max_msg_size=config.max_value_size + HEADER_ROOM if config.max_value_size > 0 else -1,
        storage=config.storage,
        num_replicas=config.replicas,
        discard="new",
        duplicate_window=Duration.of(duplicate_window),
        allow_rollup_hdrs=True,
        deny_delete=True,
        allow_direct=True,
        compression="s2" if config.compression else "none",
        metadata=_with_records(config, name_format) or None,
        allow_msg_ttl=True,
        subject_delete_marker_ttl=Duration.of(config.marker_ttl),
        allow_atomic=allow_atomic,
    )


def _with_records(config: BucketConfig, name_format: str | None) -> dict[str, str]:
    """The user's metadata and ours: the exact ``max_value_size``, the key-name format."""
    metadata = dict(config.metadata)
    if config.max_value_size > 0:
        metadata[_MAX_VALUE_KEY] = str(config.max_value_size)
    if name_format is not None:
        metadata[_NAME_FORMAT_KEY] = name_format
    return metadata


def name_format_of(config: StreamConfig) -> str | None:
    """The key-name format recorded in a bucket's stream (None: no record)."""
    return (config.metadata or {}).get(_NAME_FORMAT_KEY)


def bucket_config_from_stream(config: StreamConfig) -> BucketConfig:
    """Read a bucket configuration back from its stream (server metadata keys dropped)."""
    metadata = {
        k: v
        for k, v in (config.metadata or {}).items()
        if not k.startswith(_SERVER_METADATA_PREFIX) and k not in _RESERVED_KEYS
    }
    ours = (config.metadata or {}).get(_MAX_VALUE_KEY, "")
    max_value = int(ours) if ours.isdigit() else config.max_msg_size  # a peer's bucket: 1:1
    return BucketConfig(
        history=max(1, min(MAX_HISTORY, config.max_msgs_per_subject)),
        max_age=_plain(config.max_age),
        marker_ttl=_plain(config.subject_delete_marker_ttl),
        max_value_size=max_value if max_value > 0 else -1,
        max_bytes=config.max_bytes if config.max_bytes > 0 else -1,
        storage=config.storage,
        replicas=max(1, config.num_replicas),
        compression=config.compression == "s2",
        description=config.description,
        metadata=metadata,
    )
