"""msgspec Structs mirroring the JetStream JSON API (nats-server 2.15).

Field names are the server's. Defaults equal the server's defaults, and configs are encoded
with ``omit_defaults`` so only non-default fields go on the wire: the server rejects fields it
does not know (10025), so a field left at its default is never sent to an older server.
Durations are :class:`~jetstream._protocol.duration.Duration` s (``timedelta`` s): callers
pass seconds, a ``timedelta`` or ``"90s"``/``"1h"``/``"30d"``, the wire carries nanoseconds
(the encode and decode hooks in ``duration``), and zero (the server's "not set") reads as
``None``. Unknown fields in responses are ignored, so newer servers decode fine.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec

from .._errors import ClientValidationError
from .duration import Duration, optional_duration

__all__ = [
    "AccountInfo",
    "ApiError",
    "ApiStats",
    "ConsumerConfig",
    "ConsumerInfo",
    "ConsumerNamesResponse",
    "ConsumerPauseResponse",
    "MsgGetResponse",
    "PriorityGroupState",
    "PubAck",
    "PurgeResponse",
    "RawStoredMessage",
    "SequenceInfo",
    "StreamConfig",
    "StreamInfo",
    "StreamNamesResponse",
    "StreamState",
    "SuccessResponse",
]

Retention = Literal["limits", "interest", "workqueue"]
Storage = Literal["file", "memory"]
Discard = Literal["old", "new"]
Compression = Literal["none", "s2"]
PriorityPolicy = Literal["", "none", "overflow", "pinned_client", "prioritized"]
DeliverPolicy = Literal[
    "all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject"
]
AckPolicy = Literal["none", "all", "explicit"]


class ApiError(msgspec.Struct, frozen=True):
    """The ``error`` object of a failed API call or publish."""

    code: int = 0
    err_code: int = 0
    description: str = ""


class StreamConfig(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Stream configuration (``StreamConfig`` in the server's ``stream.go``)."""

    name: str
    description: str = ""
    subjects: list[str] = msgspec.field(default_factory=list)
    retention: Retention = "limits"
    max_consumers: int = -1
    max_msgs: int = -1
    max_bytes: int = -1
    max_age: Duration | None = None
    """None = unlimited."""
    max_msgs_per_subject: int = -1
    max_msg_size: int = -1
    discard: Discard = "old"
    storage: Storage = "file"
    num_replicas: int = 1
    no_ack: bool = False
    duplicate_window: Duration | None = None
    """None lets the server choose (2 min, or max_age if shorter)."""
    placement: dict[str, Any] | None = None
    mirror: dict[str, Any] | None = None
    sources: list[dict[str, Any]] | None = None
    sealed: bool = False
    deny_delete: bool = False
    deny_purge: bool = False
    allow_rollup_hdrs: bool = False
    allow_direct: bool = False
    mirror_direct: bool = False
    republish: dict[str, Any] | None = None
    discard_new_per_subject: bool = False
    metadata: dict[str, str] | None = None
    compression: Compression = "none"
    first_seq: int = 0
    subject_transform: dict[str, Any] | None = None
    consumer_limits: dict[str, Any] | None = None
    allow_msg_ttl: bool = False
    """Per-message ``Nats-TTL`` (ADR-43, API level 1). Cannot be switched off once on."""
    subject_delete_marker_ttl: Duration | None = None
    """How long a server-placed ``MaxAge`` marker lives; None = no markers. At least 1 s."""
    allow_msg_counter: bool = False
    allow_atomic: bool = False
    """Atomic batch publish (ADR-50, API level 2)."""
    allow_msg_schedules: bool = False
    allow_batched: bool = False
    """Fast-ingest batch publish (ADR-50, API level 4)."""
    persist_mode: str = ""

    def __post_init__(self) -> None:
        _normalize_durations(self, ("max_age", "duplicate_window", "subject_delete_marker_ttl"))


class StreamState(msgspec.Struct, frozen=True):
    """Counters of a stream (``StreamState``)."""

    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    first_ts: datetime | None = None
    last_seq: int = 0
    last_ts: datetime | None = None
    num_subjects: int = 0
    num_deleted: int = 0
    consumer_count: int = 0


class StreamSourceInfo(msgspec.Struct, frozen=True):
    """How far a stream has read one of its sources (``sources[]`` of ``STREAM.INFO``)."""

    name: str
    lag: int = 0
    """Messages the source had beyond ``seq`` at the last delivery."""
    active: int = -1
    """Nanoseconds since the last contact with the source; -1 before the first."""
    seq: int = 0
    """The source's sequence of the last message stored from it (0 before the first)."""


class StreamInfo(msgspec.Struct, frozen=True):
    """Reply of ``STREAM.INFO``, ``STREAM.CREATE`` and ``STREAM.UPDATE``."""

    config: StreamConfig
    state: StreamState
    created: datetime | None = None
    cluster: dict[str, Any] | None = None
    sources: list[StreamSourceInfo] | None = None
    """Progress of each source of a stream that sources others."""


class ApiStats(msgspec.Struct, frozen=True):
    """The ``api`` section of account info; ``level`` is the JetStream API level (ADR-44)."""

    level: int = 0
    total: int = 0
    errors: int = 0


class AccountInfo(msgspec.Struct, frozen=True):
    """Reply of ``$JS.API.INFO``."""

    memory: int = 0
    storage: int = 0
    streams: int = 0
    consumers: int = 0
    api: ApiStats = ApiStats()
    domain: str = ""
    limits: dict[str, Any] | None = None


class PubAck(msgspec.Struct, frozen=True):
    """A publish acknowledgement. Batch commits add ``batch`` and ``count``.

    An error ack has ``error`` set and ``seq`` 0: always check ``error`` first.
    """

    stream: str = ""
    seq: int = 0
    duplicate: bool = False
    domain: str = ""
    batch: str = ""
    count: int = 0
    val: str = ""
    error: ApiError | None = None


class ConsumerConfig(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Consumer configuration (``ConsumerConfig`` in the server's ``consumer.go``).

    Defaults are the server's zero values, so an omitted field means the same to both sides:
    note that this makes ``ack_policy`` default to ``"none"`` on the wire; :class:`Consumer`
    helpers pass ``"explicit"`` where acknowledgements are wanted. Durations (``ack_wait``,
    ``backoff``, ``max_expires``, ``inactive_threshold``) take seconds, a ``timedelta`` or a
    string like ``"30s"``.
    """

    name: str = ""
    durable_name: str = ""
    description: str = ""
    deliver_policy: DeliverPolicy = "all"
    opt_start_seq: int = 0
    opt_start_time: datetime | None = None
    ack_policy: AckPolicy = "none"
    ack_wait: Duration | None = None
    max_deliver: int = 0
    backoff: list[Duration] | None = None
    filter_subject: str = ""
    filter_subjects: list[str] | None = None
    replay_policy: Literal["instant", "original"] = "instant"
    sample_freq: str = ""
    max_waiting: int = 0
    max_ack_pending: int = 0
    headers_only: bool = False
    max_batch: int = 0
    max_expires: Duration | None = None
    max_bytes: int = 0
    inactive_threshold: Duration | None = None
    num_replicas: int = 0
    mem_storage: bool = False
    metadata: dict[str, str] | None = None
    deliver_subject: str = ""
    """Push consumers only; this library pulls."""
    priority_groups: list[str] | None = None
    """ADR-42 priority groups (server 2.11+; one group): pulls must name one as ``group``."""
    priority_policy: PriorityPolicy = ""
    """``"pinned_client"``: one client at a time (the pinned one) receives the group's
    messages; ``"overflow"`` / ``"prioritized"``: see ADR-42."""
    priority_timeout: Duration | None = None
    """``pinned_client``: the pin is released when the pinned client sends no pull for this
    long (a waiting pull does not count); another client's pull is pinned next."""

    def __post_init__(self) -> None:
        _normalize_durations(
            self, ("ack_wait", "max_expires", "inactive_threshold", "priority_timeout")
        )
        if self.backoff is not None:
            steps = [optional_duration(step, name="backoff") for step in self.backoff]
            if any(step is None for step in steps):
                raise ClientValidationError(f"backoff steps must be positive: {self.backoff!r}")
            self.backoff = [step for step in steps if step is not None]


def _normalize_durations(config: object, fields: tuple[str, ...]) -> None:
    """Turn each duration field a caller set (seconds, timedelta, string) into a Duration."""
    for name in fields:
        setattr(config, name, optional_duration(getattr(config, name), name=name))


class SequenceInfo(msgspec.Struct, frozen=True):
    consumer_seq: int = 0
    stream_seq: int = 0
    last_active: datetime | None = None
    """When the last message was delivered (``delivered``) or acknowledged (``ack_floor``),
    by the server's clock; None before the first."""


class PriorityGroupState(msgspec.Struct, frozen=True):
    """A priority group's state in consumer info (``pinned_client`` policy: who is pinned)."""

    group: str = ""
    pinned_client_id: str = ""
    """The pin id of the pinned client's pulls (their ``Nats-Pin-Id``); "" when none."""
    pinned_ts: datetime | None = None
    """When it was pinned (the server sends year 1 when nobody is)."""

    @property
    def pinned(self) -> bool:
        """True while a client holds the pin."""
        return bool(self.pinned_client_id)


class ConsumerInfo(msgspec.Struct, frozen=True):
    """Reply of ``CONSUMER.CREATE`` and ``CONSUMER.INFO``."""

    stream_name: str = ""
    name: str = ""
    config: ConsumerConfig | None = None
    created: datetime | None = None
    delivered: SequenceInfo = SequenceInfo()
    ack_floor: SequenceInfo = SequenceInfo()
    num_pending: int = 0
    num_ack_pending: int = 0
    num_redelivered: int = 0
    num_waiting: int = 0
    push_bound: bool = False
    priority_groups: list[PriorityGroupState] | None = None
    """The state of each priority group (pinned client id and time)."""
    ts: datetime | None = None
    """When the server answered, by its clock (compare with ``created`` and
    ``delivered.last_active``)."""
    paused: bool = False
    """Its deliveries are paused (``pause_consumer``)."""


class ConsumerNamesResponse(msgspec.Struct, frozen=True):
    """One page of ``CONSUMER.NAMES``."""

    total: int = 0
    offset: int = 0
    limit: int = 0
    consumers: list[str] | None = None

    @property
    def count(self) -> int:
        """How many names this page holds."""
        return len(self.consumers or [])


class RawStoredMessage(msgspec.Struct, frozen=True):
    """A message in ``STREAM.MSG.GET`` replies: headers and data are base64 on the wire."""

    subject: str
    seq: int
    time: str  # RFC 3339 with nanoseconds: parsed by timestamp_ns, which keeps every digit
    hdrs: bytes = b""
    data: bytes = b""


class MsgGetResponse(msgspec.Struct, frozen=True):
    """Reply of ``STREAM.MSG.GET`` (the non-direct get, for streams without allow_direct)."""

    message: RawStoredMessage


class StreamNamesResponse(msgspec.Struct, frozen=True):
    """One page of ``STREAM.NAMES``."""

    total: int = 0
    offset: int = 0
    limit: int = 0
    streams: list[str] | None = None

    @property
    def count(self) -> int:
        """How many names this page holds."""
        return len(self.streams or [])


class PurgeResponse(msgspec.Struct, frozen=True):
    """Reply of ``STREAM.PURGE``."""

    success: bool = False
    purged: int = 0


class ConsumerPauseResponse(msgspec.Struct, frozen=True):
    """Reply of ``CONSUMER.PAUSE``."""

    paused: bool = False
    pause_until: datetime | None = None


class SuccessResponse(msgspec.Struct, frozen=True):
    """Reply of ``STREAM.DELETE`` and ``STREAM.MSG.DELETE``."""

    success: bool = False
