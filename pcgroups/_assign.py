"""Pure rules of a partitioned consumer group, identical to orbit.go's: names, validation,
which partitions a member owns, its consumer's filter subjects and the elastic stream's
subject transforms. No I/O; the facts and their sources are in ``docs/PCGROUPS-WIRE.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

from jetstream import InvalidNameError, StreamConfig
from jetstream._protocol.names import validate_name

from ._errors import (
    InvalidGroupConfigError,
    InvalidGroupNameError,
    InvalidMemberMappingError,
    InvalidPartitioningFilterError,
)
from ._models import ElasticConfig, MemberMapping, PartitioningFilter, StaticConfig

__all__ = [
    "PRIORITY_GROUP",
    "balanced_assignment",
    "config_key",
    "elastic_member_filters",
    "elastic_stream_config",
    "elastic_stream_name",
    "elastic_transforms",
    "hash_partition",
    "is_group_work_queue",
    "member_partitions",
    "partition_filters",
    "static_consumer_name",
    "static_member_filters",
    "transform_destination",
    "validate_elastic_config",
    "validate_group_names",
    "validate_key_token",
    "validate_member_name",
    "validate_static_config",
]

PRIORITY_GROUP: Final = "PCG"
"""The priority group of every member consumer (orbit ``priorityGroupName``)."""

# A stream or group name is a token of the KV key <stream>.<group>, so it must be a KV key
# token as well as a valid stream/consumer name part.
_KEY_TOKEN: Final = re.compile(r"[-_=a-zA-Z0-9]+")


def config_key(stream: str, group: str) -> str:
    """The KV key of a group's config: ``<stream>.<group>`` (orbit ``composeKey``)."""
    return f"{stream}.{group}"


def elastic_stream_name(stream: str, group: str) -> str:
    """The elastic group's work-queue stream: ``<stream>-<group>`` (orbit ``composeCGSName``)."""
    return f"{stream}-{group}"


def static_consumer_name(group: str, member: str) -> str:
    """A static member's durable consumer: ``<group>-<member>``. An elastic member's consumer
    is named after the member alone."""
    return f"{group}-{member}"


def validate_group_names(stream: str, group: str) -> None:
    """Check that ``stream`` and ``group`` can form the config key, the elastic stream name
    and consumer names.

    Raises:
        InvalidGroupNameError: either is not a non-empty ``[-_=a-zA-Z0-9]+`` string, or the
            derived stream name is longer than the server allows.
    """
    validate_key_token(stream, "stream")
    validate_key_token(group, "group")
    _as_name(elastic_stream_name(stream, group), "elastic group stream")


def validate_key_token(name: str, what: str) -> None:
    """Check that ``name`` (a stream or group name, ``what`` says which) can be one token of
    the config key ``<stream>.<group>``.

    Raises:
        InvalidGroupNameError: not a non-empty ``[-_=a-zA-Z0-9]+`` string.
    """
    if not isinstance(name, str) or not _KEY_TOKEN.fullmatch(name):
        raise InvalidGroupNameError(
            f"invalid {what} name for a consumer group: {name!r} (use letters, digits, "
            "'-', '_' or '=')"
        )


def validate_member_name(group: str, member: str) -> None:
    """Check that ``member`` can name a consumer, alone (elastic) and as ``<group>-<member>``
    (static).

    Raises:
        InvalidGroupNameError: it is not a valid consumer name.
    """
    _as_name(member, "member")
    _as_name(static_consumer_name(group, member), "member consumer")


def _as_name(name: str, what: str) -> None:
    try:
        validate_name(name, what)
    except InvalidNameError as exc:
        raise InvalidGroupNameError(str(exc)) from None


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_members_or_mappings(
    max_members: int, members: Sequence[str], mappings: Sequence[MemberMapping]
) -> None:
    if not _is_count(max_members) or max_members < 1:
        raise InvalidGroupConfigError(f"max_members must be an int >= 1, not {max_members!r}")
    if members and mappings:
        raise InvalidGroupConfigError("give either members or member_mappings, not both")
    if any(not isinstance(m, str) for m in members):
        raise InvalidGroupConfigError("members must be strings")
    if mappings:
        _check_mappings(max_members, mappings)


def _check_mappings(partitions: int, mappings: Sequence[MemberMapping]) -> None:
    # orbit validateConfig: 1..P mappings, unique members, each partition once and in range,
    # and P distinct partitions in total (so every partition is covered exactly once).
    if len(mappings) > partitions:
        raise InvalidMemberMappingError(
            f"{len(mappings)} member mappings for {partitions} partitions: at most one per "
            "partition"
        )
    seen_members: set[str] = set()
    seen: set[int] = set()
    for mapping in mappings:
        if not isinstance(mapping, MemberMapping) or not isinstance(mapping.member, str):
            raise InvalidMemberMappingError(f"not a MemberMapping: {mapping!r}")
        if mapping.member in seen_members:
            raise InvalidMemberMappingError(f"member {mapping.member!r} is mapped twice")
        seen_members.add(mapping.member)
        for p in mapping.partitions:
            if not _is_count(p) or not 0 <= p < partitions:
                raise InvalidMemberMappingError(
                    f"partition {p!r} of {mapping.member!r} is not in 0..{partitions - 1}"
                )
            if p in seen:
                raise InvalidMemberMappingError(f"partition {p} is mapped more than once")
            seen.add(p)
    if len(seen) != partitions:
        missing = sorted(set(range(partitions)) - seen)
        raise InvalidMemberMappingError(f"partitions {missing} are not mapped to any member")


def validate_static_config(config: StaticConfig) -> None:
    """orbit's rules for a static config (``validateStaticConfig``): ``max_members >= 1``,
    ``members`` and ``member_mappings`` exclusive, mappings covering each partition once.
    Members may repeat or outnumber the partitions (orbit tolerates it: extra ones get none).

    Raises:
        InvalidGroupConfigError: a rule is broken (``InvalidMemberMappingError`` for mappings).
    """
    _check_members_or_mappings(config.max_members, config.members, config.member_mappings)
    if any(not isinstance(f, str) or not f for f in config.filters):
        raise InvalidGroupConfigError("static filters must be non-empty strings")


def _wildcard_count(filter_subject: str) -> int:
    return filter_subject.split(".").count("*")


def _check_partitioning_filter(pf: PartitioningFilter) -> None:
    if not isinstance(pf, PartitioningFilter):
        raise InvalidPartitioningFilterError(f"not a PartitioningFilter: {pf!r}")
    if not isinstance(pf.filter, str) or not pf.filter:
        raise InvalidPartitioningFilterError("a partitioning filter must be a non-empty string")
    tokens = pf.filter.split(".")
    stars = tokens.count("*")
    if stars == 0 and tokens[-1] != ">":
        raise InvalidPartitioningFilterError(
            f"partitioning filter {pf.filter!r} needs a '*' token or a trailing '>'"
        )
    indexes = pf.partitioning_wildcards or ()
    if len(indexes) > stars:
        raise InvalidPartitioningFilterError(
            f"{len(indexes)} partitioning wildcards but {pf.filter!r} has {stars} '*' tokens"
        )
    if len(set(indexes)) != len(indexes):
        raise InvalidPartitioningFilterError(f"repeated partitioning wildcard in {indexes}")
    for index in indexes:
        if not _is_count(index) or not 1 <= index <= stars:
            raise InvalidPartitioningFilterError(
                f"partitioning wildcard {index!r} is not a '*' of {pf.filter!r} (1..{stars})"
            )


def validate_elastic_config(config: ElasticConfig) -> None:
    """orbit's rules for an elastic config (``validateConfig``): ``max_members >= 1``; each
    partitioning filter non-empty, with a ``*`` token or a trailing ``>``, and its wildcard
    indexes unique and within ``1..<number of '*'>``; ``members`` and ``member_mappings``
    exclusive; mappings covering each partition once.

    Raises:
        InvalidGroupConfigError: a rule is broken (``InvalidPartitioningFilterError``,
            ``InvalidMemberMappingError`` for those parts).
    """
    _check_members_or_mappings(config.max_members, config.members, config.member_mappings)
    for pf in config.partitioning_filters or ():
        _check_partitioning_filter(pf)


def balanced_assignment(members: Iterable[str], max_members: int) -> tuple[str, ...]:
    """The owner of each partition ``0..max_members-1`` under orbit's balanced assignment,
    or ``()`` when there are no members.

    Members are de-duplicated and sorted; only the first ``max_members`` take part. With
    ``n`` members each gets a contiguous block of ``max_members // n`` partitions in sorted
    order; the remaining ``max_members % n`` partitions go one each to the first members.
    """
    ordered = sorted(dict.fromkeys(members))[:max_members]
    if not ordered:
        return ()
    n = len(ordered)
    per = max_members // n
    blocks = n * per
    return tuple(
        ordered[(i // per) % n] if i < blocks else ordered[(i - blocks) % n]
        for i in range(max_members)
    )


def member_partitions(
    members: Sequence[str],
    max_members: int,
    member_mappings: Sequence[MemberMapping],
    member: str,
) -> tuple[int, ...]:
    """The partitions ``member`` owns: balanced over ``members`` when there are any, else the
    member's mappings in their order (orbit ``GeneratePartitionFilters``)."""
    if members:
        owners = balanced_assignment(members, max_members)
        return tuple(i for i, owner in enumerate(owners) if owner == member)
    return tuple(p for m in member_mappings if m.member == member for p in m.partitions)


def partition_filters(
    members: Sequence[str],
    max_members: int,
    member_mappings: Sequence[MemberMapping],
    member: str,
    filters: Sequence[str],
) -> tuple[str, ...]:
    """The member consumer's ``filter_subjects``, in orbit's order: for each filter (``>``
    when there are none), ``"<p>.<filter>"`` per owned partition; with member mappings orbit
    writes ``"<p>.>"`` whatever the filter. Repeats (mappings with several filters, which the
    server would refuse as overlapping) are dropped, keeping the first.
    """
    owned = member_partitions(members, max_members, member_mappings, member)
    result: dict[str, None] = {}
    for f in filters or (">",):
        tail = f if members else ">"
        for p in owned:
            result.setdefault(f"{p}.{tail}")
    return tuple(result)


def static_member_filters(config: StaticConfig, member: str) -> tuple[str, ...]:
    """A static member's consumer filters (empty: the member owns nothing, no consumer)."""
    return partition_filters(
        config.members, config.max_members, config.member_mappings, member, config.filters
    )


def elastic_member_filters(config: ElasticConfig, member: str) -> tuple[str, ...]:
    """An elastic member's consumer filters on ``<stream>-<group>`` (orbit
    ``ElasticGetPartitionFilters``)."""
    filters = [pf.filter for pf in config.partitioning_filters or ()]
    return partition_filters(
        config.members, config.max_members, config.member_mappings, member, filters
    )


def transform_destination(pf: PartitioningFilter, max_members: int) -> str:
    """The subject-transform destination that puts the partition first: each ``*`` of the
    filter becomes ``{{Wildcard(k)}}`` (k counted from 1), prefixed by
    ``{{Partition(N)}}.`` or ``{{Partition(N,i,j)}}.`` (orbit ``getPartitioningTransformDest``).
    """
    tokens = pf.filter.split(".")
    k = 0
    for i, token in enumerate(tokens):
        if token == "*":
            k += 1
            tokens[i] = f"{{{{Wildcard({k})}}}}"
    args = ",".join(str(n) for n in (max_members, *(pf.partitioning_wildcards or ())))
    return f"{{{{Partition({args})}}}}." + ".".join(tokens)


def elastic_transforms(config: ElasticConfig) -> tuple[tuple[str, str], ...]:
    """``(source, destination)`` of each subject transform of the elastic stream's source:
    one per partitioning filter, or ``(">", "{{Partition(N)}}.>")`` when there are none."""
    filters = config.partitioning_filters or (PartitioningFilter(">"),)
    return tuple((pf.filter, transform_destination(pf, config.max_members)) for pf in filters)


def elastic_stream_config(
    stream: str, group: str, config: ElasticConfig, source: StreamConfig
) -> StreamConfig:
    """The work-queue stream orbit.go's ``CreateElastic`` makes for an elastic group on
    ``stream`` (whose config is ``source``): named ``<stream>-<group>``, no subjects of its
    own, sourcing ``stream`` through the partitioning transforms, the source's replicas and
    storage, ``max_buffered_*`` as limits with discard new, direct get on."""
    transforms = [{"src": src, "dest": dest} for src, dest in elastic_transforms(config)]
    return StreamConfig(
        name=elastic_stream_name(stream, group),
        retention="workqueue",
        num_replicas=source.num_replicas,
        storage=source.storage,
        max_msgs=config.max_buffered_msgs or -1,
        max_bytes=config.max_buffered_bytes or -1,
        discard="new",
        sources=[{"name": stream, "subject_transforms": transforms}],
        allow_direct=True,
    )


def is_group_work_queue(config: StreamConfig, stream: str) -> bool:
    """Whether ``config`` is that of an elastic group's work queue on ``stream`` (ours or
    orbit's, whatever its partitioning): a work-queue stream without subjects of its own
    that sources ``stream`` alone, through partitioning transforms."""
    if config.retention != "workqueue" or config.subjects or len(config.sources or ()) != 1:
        return False
    source = (config.sources or [{}])[0]
    transforms = source.get("subject_transforms") or ()
    return (
        source.get("name") == stream
        and bool(transforms)
        and all(str(t.get("dest", "")).lower().startswith("{{partition(") for t in transforms)
    )


def hash_partition(key: bytes, partitions: int) -> int:
    """The partition the server's ``{{Partition(N,...)}}`` picks: FNV-1a 32-bit of ``key``
    modulo ``partitions``. ``key`` is the selected wildcard tokens concatenated without
    separators, or the whole subject for ``{{Partition(N)}}``."""
    h = 0x811C9DC5
    for byte in key:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h % partitions if partitions else 0
