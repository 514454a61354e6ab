"""Administration of elastic groups: the config orbit.go keeps in ``elastic-consumer-groups``
and the work-queue stream ``<stream>-<group>`` that sources the stream with the partition
number put first (docs/PCGROUPS-WIRE.md sections 3 and 7).

Every change of a stored config is a KV compare-and-set on the revision read, retried on a
conflict, so concurrent membership changes never lose one another (orbit blindly ``Put``s
mapping changes). ``None`` and ``()`` of ``partitioning_filters`` survive every rewrite.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Iterable
from typing import Final

import msgspec

from jetstream import (
    AsyncListing,
    ClientValidationError,
    JetStream,
    StreamConfig,
    StreamExistsError,
    StreamNotFoundError,
)
from jetstream._protocol.names import validate_subject_token
from kvstore import Bucket, KeyExistsError, WrongRevisionError

from ._assign import (
    config_key,
    elastic_member_filters,
    elastic_stream_config,
    elastic_stream_name,
    is_group_work_queue,
    validate_elastic_config,
    validate_group_names,
    validate_member_name,
)
from ._errors import (
    CorruptGroupConfigError,
    GroupExistsError,
    GroupNotFoundError,
    InvalidGroupConfigError,
    InvalidPartitioningFilterError,
)
from ._filter_limits import check_elastic_filters
from ._models import (
    ELASTIC_BUCKET,
    ElasticConfig,
    MemberMapping,
    PartitioningFilter,
    decode_elastic_config,
    encode_elastic_config,
)
from ._store import ensure_bucket, existing_bucket, group_names, read_config

__all__ = [
    "add_members",
    "create_elastic",
    "delete_elastic",
    "delete_member_mappings",
    "delete_members",
    "elastic_config",
    "elastic_partition_filters",
    "list_elastic",
    "read_elastic",
    "set_member_mappings",
]

_KIND: Final = "elastic"
CAS_ATTEMPTS: Final = 20
"""Compare-and-set rounds before a config change gives up (each lost round means another
client changed the config in between)."""


def _decoded(data: bytes, stream: str, group: str) -> ElasticConfig:
    config = decode_elastic_config(data)
    try:
        validate_elastic_config(config)
    except InvalidGroupConfigError as exc:
        raise CorruptGroupConfigError(
            f"the stored config of elastic group {group!r} on {stream!r} breaks a rule: {exc}"
        ) from exc
    return config


async def read_elastic(js: JetStream, stream: str, group: str) -> tuple[Bucket, ElasticConfig, int]:
    """The config bucket, the group's config and its revision.

    Raises:
        GroupNotFoundError: no such group.
        CorruptGroupConfigError: the stored value is not a valid elastic config.
    """
    bucket = await existing_bucket(js, ELASTIC_BUCKET)
    data, revision = await read_config(bucket, stream, group, _KIND)
    assert bucket is not None  # read_config raised otherwise
    return bucket, _decoded(data, stream, group), revision


def _is_list(values: object, what: str) -> None:
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise InvalidGroupConfigError(f"{what} must be a list, not {values!r}")


def _checked_filters(
    filters: Iterable[PartitioningFilter] | None,
) -> tuple[PartitioningFilter, ...] | None:
    if filters is None:
        return None
    _is_list(filters, "filters")
    checked = tuple(filters)
    for pf in checked:
        if not isinstance(pf, PartitioningFilter):
            raise InvalidPartitioningFilterError(f"not a PartitioningFilter: {pf!r}")
        try:
            validate_subject_token(pf.filter, "partitioning filter")
        except ClientValidationError as exc:
            raise InvalidPartitioningFilterError(str(exc)) from None
    if len({pf.filter for pf in checked}) != len(checked):
        raise InvalidPartitioningFilterError(f"repeated filter in {[pf.filter for pf in checked]}")
    return checked


def _checked_limit(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidGroupConfigError(f"{what} must be an int >= 0 (0 = no limit), not {value!r}")
    return value


def _same_partitioning(a: ElasticConfig, b: ElasticConfig) -> bool:
    """What orbit's CreateElastic compares (members may have changed since the create)."""
    return (
        a.max_members == b.max_members
        and a.partitioning_filters == b.partitioning_filters
        and a.max_buffered_msgs == b.max_buffered_msgs
        and a.max_buffered_bytes == b.max_buffered_bytes
    )


async def create_elastic(
    js: JetStream,
    stream: str,
    group: str,
    *,
    max_members: int,
    filters: Iterable[PartitioningFilter] | None = None,
    max_buffered_msgs: int = 0,
    max_buffered_bytes: int = 0,
) -> ElasticConfig:
    """Create an elastic group on ``stream`` and return its config (no members yet; add them
    with :func:`add_members` or :func:`set_member_mappings`). Creating it again with the same
    partitioning returns the stored config.

    The config goes to ``elastic-consumer-groups`` under ``<stream>.<group>`` (KV create: of
    two different concurrent creates one fails), and the work-queue stream
    ``<stream>-<group>`` sources ``stream``, each message's subject prefixed with its
    partition ``0 .. max_members-1``: the server's hash of the tokens at each filter's
    ``partitioning_wildcards`` (the whole subject when none are given). ``filters=None``
    partitions everything by subject. ``max_buffered_*`` limit the work-queue stream (0 = no
    limit; when full, sourcing waits). A work queue left behind by a group whose config is
    gone (the whole config bucket deleted) is replaced, with what it still held.

    Raises:
        InvalidGroupNameError: a bad stream or group name.
        InvalidGroupConfigError: ``max_members`` below 1, negative limits, more filter
            subjects per member than :data:`MAX_MEMBER_FILTERS` (``max_members`` x filters)
            or than a request can hold; ``InvalidPartitioningFilterError`` for a filter
            without ``*`` or trailing ``>``, a bad subject, wildcard indexes that are
            repeated or not ``*`` tokens of it, a filter covering another. Nothing is sent.
        StreamNotFoundError: no such stream; nothing is written.
        GroupExistsError: the group (or its work-queue stream) exists with another
            partitioning, or a stream that is no group's work queue has its name; nothing
            is written.
        CorruptGroupConfigError: the group exists and its stored config is unreadable.
    """
    validate_group_names(stream, group)
    config = ElasticConfig(
        max_members=max_members,
        partitioning_filters=_checked_filters(filters),
        max_buffered_msgs=_checked_limit(max_buffered_msgs, "max_buffered_msgs"),
        max_buffered_bytes=_checked_limit(max_buffered_bytes, "max_buffered_bytes"),
    )
    validate_elastic_config(config)
    filter_subjects = [pf.filter for pf in config.partitioning_filters or ()]
    check_elastic_filters(config.max_members, filter_subjects, js.nc.max_payload)
    info = await js.stream_info(stream)
    bucket = await ensure_bucket(js, ELASTIC_BUCKET, replicas=info.config.num_replicas)
    existing = await _existing(bucket, stream, group)
    if existing is not None and not _same_partitioning(existing, config):
        raise GroupExistsError(stream, group, _KIND)
    queue = elastic_stream_config(stream, group, config, info.config)
    try:
        await js.add_stream(queue)
    except StreamExistsError:
        if existing is not None:
            raise GroupExistsError(stream, group, _KIND) from None
        return await _replace_left_queue(js, bucket, stream, group, config, queue)
    if existing is not None:
        return existing
    return await _store_new(bucket, stream, group, config)


async def _store_new(
    bucket: Bucket, stream: str, group: str, config: ElasticConfig
) -> ElasticConfig:
    """Store a new group's config (KV create: of two concurrent creates one wins); the stored
    config when another create of the same partitioning won.

    Raises:
        GroupExistsError: another create with another partitioning won.
    """
    try:
        await bucket.create(config_key(stream, group), encode_elastic_config(config))
    except KeyExistsError:  # created meanwhile by another client
        return await _stored_same(bucket, stream, group, config)
    return config


async def _stored_same(
    bucket: Bucket, stream: str, group: str, config: ElasticConfig
) -> ElasticConfig:
    """The config another create stored first, if it has the same partitioning.

    Raises:
        GroupExistsError: it has another partitioning (or was deleted meanwhile).
    """
    stored = await _existing(bucket, stream, group)
    if stored is None or not _same_partitioning(stored, config):
        raise GroupExistsError(stream, group, _KIND) from None
    return stored


async def _replace_left_queue(
    js: JetStream,
    bucket: Bucket,
    stream: str,
    group: str,
    config: ElasticConfig,
    queue: StreamConfig,
) -> ElasticConfig:
    """No config is stored but the work queue exists with another partitioning: left behind
    by a group whose config went without it (the whole config bucket deleted, a delete cut
    short), or just made by a concurrent create of another partitioning. Storing the config
    first decides which create wins; the winner replaces the work queue (with whatever it
    still held, as deleting the group would have).

    Raises:
        GroupExistsError: the stream is not a group's work queue, or a concurrent create of
            another partitioning stored its config first.
    """
    if not await _is_left_queue(js, stream, group):
        raise GroupExistsError(
            stream, group, _KIND, f"cannot be created: the stream {queue.name!r} exists and is "
            "not a consumer group's work queue",
        )  # fmt: skip
    try:
        await bucket.create(config_key(stream, group), encode_elastic_config(config))
    except KeyExistsError:  # another create won: it replaces the work queue
        return await _stored_same(bucket, stream, group, config)
    for _ in range(CAS_ATTEMPTS):
        with contextlib.suppress(StreamNotFoundError):
            await js.delete_stream(queue.name)
        try:
            await js.add_stream(queue)
            break
        except StreamExistsError:  # made again meanwhile by a create that loses the config
            continue
    return config


async def _is_left_queue(js: JetStream, stream: str, group: str) -> bool:
    """Whether ``<stream>-<group>`` exists as a group's work queue on ``stream``."""
    try:
        info = await js.stream_info(elastic_stream_name(stream, group))
    except StreamNotFoundError:
        return False
    return is_group_work_queue(info.config, stream)


async def _existing(bucket: Bucket, stream: str, group: str) -> ElasticConfig | None:
    try:
        data, _ = await read_config(bucket, stream, group, _KIND)
    except GroupNotFoundError:
        return None
    return _decoded(data, stream, group)


async def elastic_config(js: JetStream, stream: str, group: str) -> ElasticConfig:
    """The stored config of an elastic group (written by us or by orbit.go).

    Raises:
        InvalidGroupNameError: bad stream or group name; nothing is sent.
        GroupNotFoundError: no such group.
        CorruptGroupConfigError: the stored value is not a valid elastic config.
    """
    validate_group_names(stream, group)
    _, config, _ = await read_elastic(js, stream, group)
    return config


def list_elastic(js: JetStream, stream: str) -> AsyncListing[str]:
    """The names of the elastic groups on ``stream``, sorted: ``async for`` or ``await`` (a
    list); a config key whose group name no call accepts is skipped, warned.

    Raises:
        InvalidGroupNameError: (iterating) bad stream name; nothing is sent.
        JetStreamError: (iterating) the listing failed.
    """
    return AsyncListing(group_names(js, ELASTIC_BUCKET, stream))


async def delete_elastic(js: JetStream, stream: str, group: str) -> None:
    """Delete an elastic group: its config (a ``DEL`` tombstone, as orbit writes: members
    stop), then its work-queue stream with whatever it still holds and its members'
    consumers. A work queue whose config is gone already (the whole config bucket was
    deleted) is deleted too.

    Raises:
        InvalidGroupNameError: bad stream or group name; nothing is sent.
        GroupNotFoundError: no such group (neither a config nor a work queue).
        WrongRevisionError: the config was rewritten during each of the attempts.
    """
    validate_group_names(stream, group)
    try:
        await _delete_config(js, stream, group)
    except GroupNotFoundError:
        if not await _is_left_queue(js, stream, group):
            raise
    # gone already when deleted by hand, or when the create never got that far
    with contextlib.suppress(StreamNotFoundError):
        await js.delete_stream(elastic_stream_name(stream, group))


async def _delete_config(js: JetStream, stream: str, group: str) -> None:
    """Tombstone the group's config with compare-and-set, retried on a conflict.

    Raises:
        GroupNotFoundError: no config.
        WrongRevisionError: the config was rewritten during each of the attempts.
    """
    bucket = await existing_bucket(js, ELASTIC_BUCKET)
    for attempt in range(CAS_ATTEMPTS):
        _, revision = await read_config(bucket, stream, group, _KIND)
        assert bucket is not None
        try:
            await bucket.delete(config_key(stream, group), revision=revision)
            break
        except WrongRevisionError:
            if attempt == CAS_ATTEMPTS - 1:
                raise
            await _backoff(attempt)


async def _backoff(attempt: int) -> None:
    # spread the retries of clients that collided, so that one of them wins the next round
    await asyncio.sleep(random.uniform(0, 0.005 * 2 ** min(attempt, 6)))


async def _change(
    js: JetStream,
    stream: str,
    group: str,
    change: Callable[[ElasticConfig], ElasticConfig],
) -> ElasticConfig:
    """Apply ``change`` to the stored config with compare-and-set, re-reading and re-applying
    after each conflict; the config as stored (unchanged configs are not rewritten)."""
    for attempt in range(CAS_ATTEMPTS):
        bucket, config, revision = await read_elastic(js, stream, group)
        new = change(config)
        if new == config:
            return config
        validate_elastic_config(new)
        try:
            await bucket.update(config_key(stream, group), encode_elastic_config(new), revision)
            return new
        except WrongRevisionError:
            if attempt == CAS_ATTEMPTS - 1:
                raise
            await _backoff(attempt)
    raise AssertionError("unreachable")


def _member_list(group: str, members: Iterable[str]) -> tuple[str, ...]:
    _is_list(members, "members")
    names = tuple(members)
    for name in names:
        validate_member_name(group, name)
    return tuple(dict.fromkeys(names))


def _no_mappings(config: ElasticConfig, stream: str, group: str) -> None:
    if config.member_mappings:
        raise InvalidGroupConfigError(
            f"elastic group {group!r} on {stream!r} uses member mappings: delete them first "
            "to manage members"
        )


async def add_members(
    js: JetStream, stream: str, group: str, members: Iterable[str]
) -> ElasticConfig:
    """Add ``members`` to an elastic group (those already in stay, in their place; new ones
    are appended); return the stored config. Compare-and-set: concurrent changes all land.

    Raises:
        InvalidGroupNameError: a bad stream, group or member name; nothing is sent.
        InvalidGroupConfigError: ``members`` is not a list of names, or the group uses member
            mappings (orbit refuses too); nothing is written.
        GroupNotFoundError: no such group.
        CorruptGroupConfigError: the stored config is unreadable.
        WrongRevisionError: the config changed under each of the attempts.
    """
    validate_group_names(stream, group)
    names = _member_list(group, members)

    def change(config: ElasticConfig) -> ElasticConfig:
        _no_mappings(config, stream, group)
        added = tuple(n for n in names if n not in config.members)
        return msgspec.structs.replace(config, members=config.members + added)

    return await _change(js, stream, group, change)


async def delete_members(
    js: JetStream, stream: str, group: str, members: Iterable[str]
) -> ElasticConfig:
    """Drop ``members`` from an elastic group (names not in it are ignored); return the
    stored config. Their consumers are deleted by the members themselves as they follow the
    config (orbit's members do the same).

    Raises:
        InvalidGroupNameError, InvalidGroupConfigError, GroupNotFoundError,
        CorruptGroupConfigError, WrongRevisionError: as :func:`add_members`.
    """
    validate_group_names(stream, group)
    names = set(_member_list(group, members))

    def change(config: ElasticConfig) -> ElasticConfig:
        _no_mappings(config, stream, group)
        kept = tuple(m for m in config.members if m not in names)
        return msgspec.structs.replace(config, members=kept)

    return await _change(js, stream, group, change)


async def set_member_mappings(
    js: JetStream, stream: str, group: str, mappings: Iterable[MemberMapping]
) -> ElasticConfig:
    """Assign the partitions by hand: each of ``0 .. max_members-1`` to exactly one member.
    Replaces the member list (orbit's rule: members and mappings are exclusive). The check
    against ``max_members`` uses the stored config; compare-and-set.

    Raises:
        InvalidGroupNameError: a bad stream, group or member name; nothing is sent.
        InvalidMemberMappingError: mappings that do not cover each partition once, repeat a
            member, or are more than the partitions; nothing is written.
        GroupNotFoundError, CorruptGroupConfigError, WrongRevisionError: as
            :func:`add_members`.
    """
    validate_group_names(stream, group)
    _is_list(mappings, "mappings")
    new_mappings = tuple(mappings)
    for mapping in new_mappings:
        if isinstance(mapping, MemberMapping):
            validate_member_name(group, mapping.member)
    if not new_mappings:
        raise InvalidGroupConfigError("no member mappings given: use delete_member_mappings")

    def change(config: ElasticConfig) -> ElasticConfig:
        return msgspec.structs.replace(config, members=(), member_mappings=new_mappings)

    return await _change(js, stream, group, change)


async def delete_member_mappings(js: JetStream, stream: str, group: str) -> ElasticConfig:
    """Remove the member mappings (the group then has no members until some are added);
    compare-and-set.

    Raises:
        InvalidGroupNameError, GroupNotFoundError, CorruptGroupConfigError,
        WrongRevisionError: as :func:`add_members`.
    """
    validate_group_names(stream, group)
    return await _change(
        js, stream, group, lambda config: msgspec.structs.replace(config, member_mappings=())
    )


async def elastic_partition_filters(
    js: JetStream, stream: str, group: str, member: str
) -> tuple[str, ...]:
    """The filter subjects of ``member``'s consumer on ``<stream>-<group>`` under the stored
    config (``()``: it owns no partition). :func:`elastic_member_filters` computes them from
    a config in hand.

    Raises:
        InvalidGroupNameError: a bad stream, group or member name; nothing is sent.
        GroupNotFoundError, CorruptGroupConfigError: as :func:`elastic_config`.
    """
    validate_group_names(stream, group)
    validate_member_name(group, member)
    _, config, _ = await read_elastic(js, stream, group)
    return elastic_member_filters(config, member)
