"""Which messages of a group no member is processing: ``static_status`` and
``elastic_status``, and the check a member makes before it joins.

A group processes a message only if its subject is selected (an elastic group's partitioning
filters, a static member's filters after the partition token), its partition is owned by a
member under the stored config, and that member runs. Three states strand messages without
any error from the server: a config whose ``max_members`` no longer matches the stream's
partitioning (edited in the bucket: the work queue, or the static stream's subject transform,
still splits messages into the old number of partitions), a member that never runs (its
name may not even be a valid consumer name: orbit stores any), and subjects no filter
selects (an elastic group's work queue never copies them). The status lists the partitions,
their owners and what waits in each; a member refuses to start on a partitioning mismatch.

Counts come from the server (:meth:`JetStream.count_messages`, a direct get): ``None`` where
a stream does not allow direct get (an elastic group's work queue always does).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine
from typing import Any, Final, TypeVar

import msgspec

from jetstream import (
    ConsumerInfo,
    ConsumerNotFoundError,
    JetStream,
    NoRespondersError,
    PermissionDeniedError,
    StreamConfig,
    StreamNotFoundError,
)
from jetstream._summary import summary, text

from ._assign import (
    balanced_assignment,
    elastic_stream_name,
    elastic_transforms,
    member_partitions,
    static_consumer_name,
    validate_group_names,
    validate_member_name,
)
from ._elastic import read_elastic
from ._errors import InvalidGroupNameError
from ._models import ElasticConfig, StaticConfig
from ._static import static_config

__all__ = [
    "GroupStatus",
    "PartitionStatus",
    "elastic_status",
    "partition_count",
    "partitioning_mismatch",
    "static_status",
    "unjoinable_members",
]

T = TypeVar("T")
_PARTITION: Final = re.compile(r"\{\{\s*partition\s*\(\s*(\d+)", re.IGNORECASE)
_COUNTS_AT_ONCE: Final = 16  # count requests in flight together


class PartitionStatus(msgspec.Struct, frozen=True):
    """One partition of a group."""

    partition: int
    member: str | None
    """Its owner under the stored config; None: no member owns it (beyond ``max_members``,
    or not mapped)."""
    consuming: bool
    """Whether the owner is consuming now: elastic, its consumer exists; static, its
    durable has a pull waiting (as ``*_active_members``)."""
    waiting: int | None
    """Messages in the partition its owner has not processed (elastic: what the work queue
    holds in it; static: what the owner's filters select beyond its durable's ack floor, or
    all of it without a durable); None: not counted (the stream has no direct get)."""


class GroupStatus(msgspec.Struct, frozen=True):
    """What a group's members process and what they leave: from :func:`static_status` or
    :func:`elastic_status`."""

    kind: str
    stream: str
    group: str
    partitions: tuple[PartitionStatus, ...]
    """Every partition the stream's messages can be in: ``0 .. max_members-1``, and beyond
    when the stream's partitioning makes more."""
    unselected: int | None
    """Messages of ``stream`` that no filter selects (elastic: no partitioning filter;
    static: no member's filter after the partition token): never processed. None: not
    counted."""
    mismatch: str | None
    """How the stored config disagrees with the stream's partitioning (members then refuse
    to start with :class:`GroupConfigMismatchError`); None: it agrees."""
    unjoinable: tuple[str, ...]
    """Members of the config whose names cannot name a consumer (orbit stores any name):
    they never run, so their partitions are never processed."""

    def __str__(self) -> str:
        """One line per partition (owner, consuming, waiting), then what no member processes
        (``repr()`` has every field)."""
        return summary(
            f"{self.kind.capitalize()} group {text(self.group)} on stream {text(self.stream)}",
            [
                *((f"partition {p.partition}", _partition_text(p)) for p in self.partitions),
                ("unselected", None if self.unselected is None else f"{self.unselected} messages"),
                ("mismatch", None if self.mismatch is None else text(self.mismatch)),
                ("unjoinable", ", ".join(text(m) for m in self.unjoinable) or None),
            ],
        )

    @property
    def stranded(self) -> tuple[PartitionStatus, ...]:
        """The partitions holding messages (or not counted) that no member is consuming
        now: no owner, an owner that cannot join, or one that is not running."""
        return tuple(p for p in self.partitions if not p.consuming and p.waiting != 0)


def _partition_text(partition: PartitionStatus) -> str:
    waiting = "not counted" if partition.waiting is None else f"{partition.waiting} waiting"
    if partition.member is None:
        return f"no member, {waiting}"
    consuming = "consuming" if partition.consuming else "not consuming"
    return f"{text(partition.member)}, {consuming}, {waiting}"


def partition_count(transform_destination: str) -> int | None:
    """N of a ``{{Partition(N,...)}}`` subject-transform destination (None: none there)."""
    found = _PARTITION.search(transform_destination)
    return int(found.group(1)) if found else None


def _owners(config: StaticConfig | ElasticConfig) -> dict[int, str]:
    """The owner of each partition that has one (orbit's assignment)."""
    if config.members:
        return dict(enumerate(balanced_assignment(config.members, config.max_members)))
    return {p: m.member for m in config.member_mappings for p in m.partitions}


def _can_join(group: str, member: str) -> bool:
    try:
        validate_member_name(group, member)
    except InvalidGroupNameError:
        return False
    return True


def unjoinable_members(
    config: StaticConfig | ElasticConfig, group: str
) -> dict[str, tuple[int, ...]]:
    """The members of ``config`` whose names cannot name a consumer, with the partitions
    each owns (never processed)."""
    names = config.members or tuple(m.member for m in config.member_mappings)
    return {
        name: member_partitions(config.members, config.max_members, config.member_mappings, name)
        for name in dict.fromkeys(names)
        if not _can_join(group, name)
    }


def _source_transforms(config: StreamConfig, origin: str) -> list[tuple[str, str]]:
    """The (source, destination) transforms a work queue applies to ``origin``."""
    for source in config.sources or ():
        if source.get("name") == origin:
            return [
                (t.get("src", ""), t.get("dest", ""))
                for t in source.get("subject_transforms") or ()
            ]
    return []


def _elastic_mismatch(
    config: ElasticConfig, transforms: list[tuple[str, str]], queue: str
) -> str | None:
    """What strands messages: the work queue splitting them into another number of
    partitions, or copying other subjects, than the config says (how a subject is hashed
    into a partition strands nothing)."""
    counts = sorted({n for _, dest in transforms if (n := partition_count(dest)) is not None})
    if counts != [config.max_members]:
        made = " or ".join(str(n) for n in counts) or "no"
        return (
            f"the work queue {queue} splits messages into {made} partitions, the config has "
            f"max_members {config.max_members}"
        )
    copied = sorted(src for src, _ in transforms)
    selected = sorted(src for src, _ in elastic_transforms(config))
    if copied != selected:
        return f"the work queue {queue} copies {copied}, the config's filters are {selected}"
    return None


def _static_partitions(config: StreamConfig) -> int | None:
    transform = config.subject_transform or {}
    return partition_count(str(transform.get("dest", "")))


def _static_mismatch(config: StaticConfig, made: int | None, stream: str) -> str | None:
    if made is None or made == config.max_members:
        return None
    return (
        f"the stream {stream} splits messages into {made} partitions (its subject transform), "
        f"the config has max_members {config.max_members}"
    )


async def partitioning_mismatch(
    js: JetStream, stream: str, group: str, config: StaticConfig | ElasticConfig
) -> str | None:
    """How ``config`` disagrees with the partitioning of the group's stream (elastic: the
    work queue's transforms; static: a ``{{partition(N,...)}}`` subject transform of the
    stream), or None (it agrees, or there is nothing to compare: no such stream yet, a
    static stream whose publishers put the partition in front, a user who may not read the
    stream's config)."""
    try:
        if isinstance(config, ElasticConfig):
            queue = elastic_stream_name(stream, group)
            info = await js.stream_info(queue)
            return _elastic_mismatch(config, _source_transforms(info.config, stream), queue)
        made = _static_partitions((await js.stream_info(stream)).config)
    except (StreamNotFoundError, PermissionDeniedError):
        return None
    return _static_mismatch(config, made, stream)


async def _count(js: JetStream, stream: str, subjects: list[str], from_seq: int) -> int | None:
    """The messages of ``stream`` on any of ``subjects`` (which do not overlap) from
    ``from_seq``; None when the stream has no direct get."""
    total = 0
    for subject in subjects:
        try:
            total += await js.count_messages(stream, subject, from_seq=from_seq)
        except NoRespondersError:  # direct get is off: nobody counts
            return None
    return total


async def _all(jobs: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Run ``jobs`` a few at a time (one request each); the first error cancels the rest."""
    limit = asyncio.Semaphore(_COUNTS_AT_ONCE)

    async def one(job: Coroutine[Any, Any, T]) -> T:
        async with limit:
            return await job

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(one(job)) for job in jobs]
    return [task.result() for task in tasks]


def _unselected(total: int, counts: list[int | None]) -> int | None:
    if any(c is None for c in counts):
        return None
    return max(0, total - sum(c for c in counts if c is not None))


async def elastic_status(js: JetStream, stream: str, group: str) -> GroupStatus:
    """What an elastic group's members process and leave: per partition of its work queue
    the owner, whether it consumes and how many messages wait there; the messages of
    ``stream`` no partitioning filter selects; a partitioning mismatch; members that cannot
    join. ``status.stranded`` lists the partitions no member is working on.

    Raises:
        InvalidGroupNameError: bad stream or group name; nothing is sent.
        GroupNotFoundError: no such group.
        CorruptGroupConfigError: the stored config is unreadable.
        StreamNotFoundError: the group's work-queue stream is gone.
    """
    validate_group_names(stream, group)
    _, config, _ = await read_elastic(js, stream, group)
    queue = elastic_stream_name(stream, group)
    transforms = _source_transforms((await js.stream_info(queue)).config, stream)
    made = [partition_count(dest) or 0 for _, dest in transforms]
    consumers = {name async for name in js.consumer_names(queue)}
    partitions = range(max([config.max_members, *made]))
    waiting = await _all([_count(js, queue, [f"{p}.>"], 1) for p in partitions])
    owned = _owners(config)
    owners = [owned.get(p) for p in partitions]
    filters = [pf.filter for pf in config.partitioning_filters or ()]
    unselected: int | None = 0
    if filters:
        total = (await js.stream_info(stream)).state.messages
        unselected = _unselected(total, await _all([_count(js, stream, [f], 1) for f in filters]))
    return GroupStatus(
        kind="elastic",
        stream=stream,
        group=group,
        partitions=tuple(
            PartitionStatus(p, owner, owner is not None and owner in consumers, count)
            for p, owner, count in zip(partitions, owners, waiting, strict=True)
        ),
        unselected=unselected,
        mismatch=_elastic_mismatch(config, transforms, queue),
        unjoinable=tuple(unjoinable_members(config, group)),
    )


async def _durable(js: JetStream, stream: str, name: str) -> ConsumerInfo | None:
    try:
        return await js.consumer_info(stream, name)
    except ConsumerNotFoundError:
        return None


def _tails(config: StaticConfig, owner: str | None) -> list[str]:
    """What a static member selects after the partition token (orbit: with mappings or no
    filters, everything)."""
    if owner is None or not config.members or not config.filters:
        return [">"]
    return list(config.filters)


async def static_status(js: JetStream, stream: str, group: str) -> GroupStatus:
    """As :func:`elastic_status`, for a static group: per partition (``0 .. max_members-1``,
    and beyond when the stream's ``{{partition(N,...)}}`` transform makes more) the owner,
    whether its durable has a pull waiting, and the messages its filters select beyond the
    durable's ack floor (a static stream keeps processed messages); the messages of the
    stream no member filter selects.

    Raises:
        InvalidGroupNameError: bad stream or group name; nothing is sent.
        GroupNotFoundError: no such group.
        CorruptGroupConfigError: the stored config is unreadable.
        StreamNotFoundError: the stream is gone.
    """
    validate_group_names(stream, group)
    config = await static_config(js, stream, group)
    info = await js.stream_info(stream)
    made = _static_partitions(info.config)
    partitions = range(max(config.max_members, made or 0))
    owned = _owners(config)
    owners = [owned.get(p) for p in partitions]
    durables = {
        name: await _durable(js, stream, static_consumer_name(group, name))
        for name in dict.fromkeys(o for o in owners if o is not None and _can_join(group, o))
    }

    def after_floor(owner: str | None) -> int:
        durable = durables.get(owner) if owner is not None else None
        return 1 if durable is None else durable.ack_floor.stream_seq + 1

    subjects = [
        [f"{p}.{tail}" for tail in _tails(config, o)]
        for p, o in zip(partitions, owners, strict=True)
    ]
    waiting = await _all(
        [_count(js, stream, s, after_floor(o)) for s, o in zip(subjects, owners, strict=True)]
    )
    stored = await _all([_count(js, stream, s, 1) for s in subjects])
    return GroupStatus(
        kind="static",
        stream=stream,
        group=group,
        partitions=tuple(
            PartitionStatus(p, owner, _waits_for_pulls(durables.get(owner or "")), count)
            for p, owner, count in zip(partitions, owners, waiting, strict=True)
        ),
        unselected=_unselected(info.state.messages, stored),
        mismatch=_static_mismatch(config, made, stream),
        unjoinable=tuple(unjoinable_members(config, group)),
    )


def _waits_for_pulls(durable: ConsumerInfo | None) -> bool:
    return durable is not None and durable.num_waiting > 0
