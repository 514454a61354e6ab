"""Consumer group configurations, stored as JSON exactly the way orbit.go writes them.

orbit.go (``pcgroups``) keeps one JSON document per group in a KV bucket; Go and Python members
of a group read and rewrite the same document, so the bytes matter: field names and order,
which empty fields are omitted (Go ``omitempty``), which are written as ``null`` (a nil slice
without ``omitempty``) and Go's HTML escaping of ``<``, ``>`` and ``&``. The facts and their
sources are in ``docs/PCGROUPS-WIRE.md``.

``None`` and ``()`` are different values where Go's nil and empty slices are written
differently (``partitioning_filters``, ``partitioning_wildcards``): orbit compares configs with
``reflect.DeepEqual``, and a rewrite that turned ``null`` into ``[]`` would stop every Go member.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import msgspec
from msgspec.structs import force_setattr

from jetstream._protocol.text import decode_json, encode_json
from jetstream._summary import size_text, summary, text

from ._errors import CorruptGroupConfigError

__all__ = [
    "ELASTIC_BUCKET",
    "STATIC_BUCKET",
    "ElasticConfig",
    "MemberMapping",
    "PartitioningFilter",
    "StaticConfig",
    "decode_elastic_config",
    "decode_static_config",
    "encode_elastic_config",
    "encode_static_config",
]

STATIC_BUCKET: Final = "static-consumer-groups"
"""The KV bucket holding static group configs (orbit ``kvStaticBucketName``)."""
ELASTIC_BUCKET: Final = "elastic-consumer-groups"
"""The KV bucket holding elastic group configs (orbit ``kvElasticBucketName``)."""

# Go's json.Marshal escapes these inside strings (HTMLEscape). They never occur outside
# strings in JSON, so replacing them in the encoded bytes is exact.
_GO_ESCAPES: Final = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def _tuple(values: Iterable[Any] | None) -> tuple[Any, ...]:
    return () if values is None else tuple(values)


def _optional_tuple(values: Iterable[Any] | None) -> tuple[Any, ...] | None:
    return None if values is None else tuple(values)


class MemberMapping(msgspec.Struct, frozen=True):
    """Partitions assigned by hand to one member (orbit ``MemberMapping``)."""

    member: str
    partitions: tuple[int, ...]

    def __post_init__(self) -> None:
        force_setattr(self, "partitions", _tuple(self.partitions))


class PartitioningFilter(msgspec.Struct, frozen=True):
    """An elastic group's subject filter and the ``*`` wildcards (1-based, counted from the
    left) whose tokens choose the partition; ``None`` or ``()`` = hash the whole subject.

    ``None`` is stored as ``null`` (Go nil), ``()`` as ``[]``: keep what was read."""

    filter: str
    partitioning_wildcards: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        force_setattr(self, "partitioning_wildcards", _optional_tuple(self.partitioning_wildcards))

    def __str__(self) -> str:
        """``orders.* (by wildcard 1)``; ``orders.> (by the whole subject)``."""
        wildcards = self.partitioning_wildcards
        if not wildcards:
            return f"{text(self.filter)} (by the whole subject)"
        numbers = ", ".join(str(n) for n in wildcards)
        return f"{text(self.filter)} (by wildcard{'s' if len(wildcards) > 1 else ''} {numbers})"


class StaticConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A static group (orbit ``StaticConsumerGroupConfig``): the stream's subjects already
    start with the partition number; ``filters`` are plain subject filters after it."""

    max_members: int
    """The number of partitions (and the most members that can receive messages)."""
    filters: tuple[str, ...] = ()
    members: tuple[str, ...] = ()
    """Members spread over the partitions by the balanced assignment."""
    member_mappings: tuple[MemberMapping, ...] = ()
    """Or an explicit assignment (exclusive with ``members``)."""

    def __post_init__(self) -> None:
        for name in ("filters", "members", "member_mappings"):
            force_setattr(self, name, _tuple(getattr(self, name)))

    def __str__(self) -> str:
        """A short summary: partitions, filters, members (``repr()`` has every field)."""
        return summary(
            f"Static group config: {self.max_members} partitions",
            [
                ("filters", "; ".join(text(f) for f in self.filters) or None),
                *_membership_rows(self.members, self.member_mappings),
            ],
        )


class ElasticConfig(msgspec.Struct, frozen=True, kw_only=True):
    """An elastic group (orbit ``ElasticConsumerGroupConfig``): a work-queue stream
    ``<stream>-<group>`` sources the stream and puts the partition number in front."""

    max_members: int
    """The number of partitions (and the most members that can receive messages)."""
    partitioning_filters: tuple[PartitioningFilter, ...] | None = None
    """``None`` (stored as ``null``) or ``()``: the whole stream, partitioned by subject."""
    max_buffered_msgs: int = 0
    """Limit of the work-queue stream in messages; 0 = unlimited (JSON ``max_buffered_msg``)."""
    max_buffered_bytes: int = 0
    """Limit of the work-queue stream in bytes; 0 = unlimited."""
    members: tuple[str, ...] = ()
    member_mappings: tuple[MemberMapping, ...] = ()

    def __post_init__(self) -> None:
        force_setattr(self, "partitioning_filters", _optional_tuple(self.partitioning_filters))
        for name in ("members", "member_mappings"):
            force_setattr(self, name, _tuple(getattr(self, name)))

    def __str__(self) -> str:
        """A short summary: partitions, how subjects are partitioned, the work queue's limits,
        members (``repr()`` has every field)."""
        filters = "; ".join(str(f) for f in self.partitioning_filters or ())
        limits = [
            f"{self.max_buffered_msgs} messages" if self.max_buffered_msgs else "",
            size_text(self.max_buffered_bytes) if self.max_buffered_bytes else "",
        ]
        return summary(
            f"Elastic group config: {self.max_members} partitions",
            [
                ("filters", filters or "every subject (by the whole subject)"),
                ("max buffered", ", ".join(limit for limit in limits if limit) or None),
                *_membership_rows(self.members, self.member_mappings),
            ],
        )


def _membership_rows(
    members: tuple[str, ...], mappings: tuple[MemberMapping, ...]
) -> list[tuple[str, object]]:
    """``members: a, b`` or ``mappings: a: 0, 2; b: 1`` (names as orbit stored them, escaped)."""
    mapped = "; ".join(
        f"{text(m.member)}: {', '.join(str(p) for p in m.partitions)}" for m in mappings
    )
    return [("members", ", ".join(text(m) for m in members) or None), ("mappings", mapped or None)]


# What Go accepts when decoding: every field optional (zero value), null for any slice.
class _WireMapping(msgspec.Struct):
    member: str = ""
    partitions: list[int] | None = None


class _WireFilter(msgspec.Struct):
    filter: str = ""
    partitioning_wildcards: list[int] | None = None


class _WireStatic(msgspec.Struct):
    max_members: int = 0
    filters: list[str] | None = None
    members: list[str] | None = None
    member_mappings: list[_WireMapping] | None = None


class _WireElastic(msgspec.Struct):
    max_members: int = 0
    partitioning_filters: list[_WireFilter] | None = None
    max_buffered_msg: int = 0
    max_buffered_bytes: int = 0
    members: list[str] | None = None
    member_mappings: list[_WireMapping] | None = None


def _go_json(document: dict[str, Any]) -> bytes:
    encoded = encode_json(msgspec.json.encode, document, what="group config")
    for raw, escaped in _GO_ESCAPES:
        encoded = encoded.replace(raw, escaped)
    return encoded


def _mappings_json(mappings: tuple[MemberMapping, ...]) -> list[dict[str, Any]]:
    return [{"member": m.member, "partitions": list(m.partitions)} for m in mappings]


def encode_static_config(config: StaticConfig) -> bytes:
    """The JSON orbit.go's ``json.Marshal`` writes for this static config, byte for byte."""
    document: dict[str, Any] = {"max_members": config.max_members}
    if config.filters:
        document["filters"] = list(config.filters)
    if config.members:
        document["members"] = list(config.members)
    if config.member_mappings:
        document["member_mappings"] = _mappings_json(config.member_mappings)
    return _go_json(document)


def _filter_json(pf: PartitioningFilter) -> dict[str, Any]:
    wildcards = pf.partitioning_wildcards
    return {
        "filter": pf.filter,
        "partitioning_wildcards": None if wildcards is None else list(wildcards),
    }


def encode_elastic_config(config: ElasticConfig) -> bytes:
    """The JSON orbit.go's ``json.Marshal`` writes for this elastic config, byte for byte."""
    filters = config.partitioning_filters
    document: dict[str, Any] = {
        "max_members": config.max_members,
        "partitioning_filters": None if filters is None else [_filter_json(f) for f in filters],
    }
    if config.max_buffered_msgs:
        document["max_buffered_msg"] = config.max_buffered_msgs
    if config.max_buffered_bytes:
        document["max_buffered_bytes"] = config.max_buffered_bytes
    if config.members:
        document["members"] = list(config.members)
    if config.member_mappings:
        document["member_mappings"] = _mappings_json(config.member_mappings)
    return _go_json(document)


def _decode(data: bytes, wire_type: type[Any], kind: str) -> Any:
    try:
        return decode_json(msgspec.json.Decoder(wire_type).decode, data)
    except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
        message = f"the stored {kind} group config is not valid: {exc}"
        raise CorruptGroupConfigError(message) from exc


def _mappings(wire: list[_WireMapping] | None) -> tuple[MemberMapping, ...]:
    return tuple(MemberMapping(m.member, _tuple(m.partitions)) for m in wire or ())


def decode_static_config(data: bytes) -> StaticConfig:
    """A static config from orbit's JSON (as Go reads it: missing fields are zero, ``null``
    lists are empty, unknown fields are ignored).

    Raises:
        CorruptGroupConfigError: not JSON, or a field of the wrong type. The rules
            (``validate_static_config``) are checked separately.
    """
    wire: _WireStatic = _decode(data, _WireStatic, "static")
    return StaticConfig(
        max_members=wire.max_members,
        filters=_tuple(wire.filters),
        members=_tuple(wire.members),
        member_mappings=_mappings(wire.member_mappings),
    )


def decode_elastic_config(data: bytes) -> ElasticConfig:
    """An elastic config from orbit's JSON; ``null`` and ``[]`` stay distinct for
    ``partitioning_filters`` and ``partitioning_wildcards`` (see the module docstring).

    Raises:
        CorruptGroupConfigError: not JSON, or a field of the wrong type. The rules
            (``validate_elastic_config``) are checked separately.
    """
    wire: _WireElastic = _decode(data, _WireElastic, "elastic")
    filters = wire.partitioning_filters
    return ElasticConfig(
        max_members=wire.max_members,
        partitioning_filters=None
        if filters is None
        else tuple(
            PartitioningFilter(f.filter, _optional_tuple(f.partitioning_wildcards)) for f in filters
        ),
        max_buffered_msgs=wire.max_buffered_msg,
        max_buffered_bytes=wire.max_buffered_bytes,
        members=_tuple(wire.members),
        member_mappings=_mappings(wire.member_mappings),
    )
