"""Administration of static groups: create, delete, list and read the configs orbit.go keeps
in the ``static-consumer-groups`` bucket.

A static group's stream already carries the partition number as the first subject token;
each member consumes with its own durable ``<group>-<member>`` on that stream.
"""

from __future__ import annotations

from collections.abc import Iterable

from jetstream import (
    AsyncListing,
    ClientValidationError,
    ConsumerNotFoundError,
    JetStream,
    StreamNotFoundError,
)
from jetstream._protocol.names import validate_subject_token
from kvstore import KeyExistsError, WrongRevisionError

from ._assign import (
    config_key,
    static_consumer_name,
    validate_group_names,
    validate_member_name,
    validate_static_config,
)
from ._errors import (
    CorruptGroupConfigError,
    GroupExistsError,
    GroupNotFoundError,
    InvalidGroupConfigError,
    InvalidGroupNameError,
)
from ._filter_limits import check_static_filters
from ._models import (
    STATIC_BUCKET,
    MemberMapping,
    StaticConfig,
    decode_static_config,
    encode_static_config,
)
from ._store import ensure_bucket, existing_bucket, group_names, read_config

__all__ = ["create_static", "delete_static", "list_static", "static_config"]

_KIND = "static"
_DELETE_ATTEMPTS = 5


def _checked_input(
    stream: str,
    group: str,
    max_members: int,
    filters: Iterable[str],
    members: Iterable[str],
    member_mappings: Iterable[MemberMapping],
) -> StaticConfig:
    """The config to store, after every check that needs no server."""
    validate_group_names(stream, group)
    for what, values in (("filters", filters), ("members", members)):
        if isinstance(values, str | bytes):  # would be taken one character at a time
            raise InvalidGroupConfigError(f"{what} must be a list of strings, not {values!r}")
    try:
        config = StaticConfig(
            max_members=max_members,
            filters=tuple(filters),
            members=tuple(members),
            member_mappings=tuple(member_mappings),
        )
    except TypeError as exc:  # not iterable
        raise InvalidGroupConfigError(f"invalid static group config: {exc}") from None
    validate_static_config(config)
    for f in config.filters:
        try:
            validate_subject_token(f, "static group filter")
        except ClientValidationError as exc:
            raise InvalidGroupConfigError(str(exc)) from None
    if len(set(config.filters)) != len(config.filters):
        raise InvalidGroupConfigError(f"repeated filter in {list(config.filters)}")
    if len(set(config.members)) != len(config.members):
        raise InvalidGroupConfigError(f"repeated member in {list(config.members)}")
    for name in (*config.members, *(m.member for m in config.member_mappings)):
        validate_member_name(group, name)
    return config


def _decoded(data: bytes, stream: str, group: str) -> StaticConfig:
    config = decode_static_config(data)
    try:
        validate_static_config(config)
    except InvalidGroupConfigError as exc:
        raise CorruptGroupConfigError(
            f"the stored config of static group {group!r} on {stream!r} breaks a rule: {exc}"
        ) from exc
    return config


async def create_static(
    js: JetStream,
    stream: str,
    group: str,
    *,
    max_members: int,
    filters: Iterable[str] = (),
    members: Iterable[str] = (),
    member_mappings: Iterable[MemberMapping] = (),
) -> StaticConfig:
    """Create a static group on ``stream`` (whose subjects start with the partition number,
    0 .. ``max_members``-1) and return its config; creating it again with the same config
    returns it.

    Give ``members`` (spread over the partitions by orbit's balanced assignment; members
    beyond ``max_members`` get none) or ``member_mappings`` (each partition to exactly one
    member). ``filters`` restrict what members receive (subject after the partition token);
    none means everything. The config is written with compare-and-set, so two creates of
    different configs cannot both succeed.

    Raises:
        InvalidGroupNameError: a stream, group or member name that cannot be used.
        InvalidGroupConfigError: ``max_members`` below 1, both members and mappings, repeated
            members or filters, bad filter subjects, a filter covering another, a member
            with more filter subjects than :data:`MAX_MEMBER_FILTERS` (its partitions x
            filters) or than a request can hold; ``InvalidMemberMappingError`` for mappings that do
            not cover each partition once. Nothing is sent.
        StreamNotFoundError: no such stream; nothing is written.
        GroupExistsError: the group exists with another config.
        CorruptGroupConfigError: the group exists and its stored config is unreadable.
    """
    config = _checked_input(stream, group, max_members, filters, members, member_mappings)
    check_static_filters(config, js.nc.max_payload)
    info = await js.stream_info(stream)
    bucket = await ensure_bucket(js, STATIC_BUCKET, replicas=info.config.num_replicas)
    try:
        await bucket.create(config_key(stream, group), encode_static_config(config))
    except KeyExistsError:
        data, _ = await read_config(bucket, stream, group, _KIND)
        if _decoded(data, stream, group) != config:
            raise GroupExistsError(stream, group, _KIND) from None
    return config


async def static_config(js: JetStream, stream: str, group: str) -> StaticConfig:
    """The stored config of a static group (written by us or by orbit.go).

    Raises:
        InvalidGroupNameError: bad stream or group name; nothing is sent.
        GroupNotFoundError: no such group.
        CorruptGroupConfigError: the stored value is not a valid static config.
    """
    validate_group_names(stream, group)
    bucket = await existing_bucket(js, STATIC_BUCKET)
    data, _ = await read_config(bucket, stream, group, _KIND)
    return _decoded(data, stream, group)


def list_static(js: JetStream, stream: str) -> AsyncListing[str]:
    """The names of the static groups on ``stream``, sorted (none when no static group was
    ever created): ``async for`` or ``await`` (a list); a config key whose group name no call
    accepts is skipped, warned.

    Raises:
        InvalidGroupNameError: (iterating) bad stream name; nothing is sent.
        JetStreamError: (iterating) the listing failed.
    """
    return AsyncListing(group_names(js, STATIC_BUCKET, stream))


async def delete_static(js: JetStream, stream: str, group: str) -> None:
    """Delete a static group: its config first (members watching it stop, orbit's included),
    then its members' durable consumers ``<group>-<member>``. Consumers of other groups are
    left alone (orbit deletes every consumer whose name starts with ``<group>-``).

    Raises:
        InvalidGroupNameError: bad stream or group name; nothing is sent.
        GroupNotFoundError: no such group.
        WrongRevisionError: the config was rewritten during each of 5 attempts.
    """
    validate_group_names(stream, group)
    bucket = await existing_bucket(js, STATIC_BUCKET)
    if bucket is None:
        raise GroupNotFoundError(stream, group, _KIND)
    for attempt in range(_DELETE_ATTEMPTS):
        data, revision = await read_config(bucket, stream, group, _KIND)
        try:
            # a DEL tombstone, as orbit writes: its members end without an error
            await bucket.delete(config_key(stream, group), revision=revision)
        except WrongRevisionError:
            if attempt == _DELETE_ATTEMPTS - 1:
                raise
            continue  # rewritten meanwhile: delete what is there now
        break
    try:
        names = _member_names(decode_static_config(data))
    except CorruptGroupConfigError:
        return  # nothing tells which consumers were its members
    for name in names:
        try:
            validate_member_name(group, name)  # orbit stores any name; skip unusable ones
            await js.delete_consumer(stream, static_consumer_name(group, name))
        except (InvalidGroupNameError, ConsumerNotFoundError):
            continue
        except StreamNotFoundError:
            return


def _member_names(config: StaticConfig) -> list[str]:
    names = dict.fromkeys((*config.members, *(m.member for m in config.member_mappings)))
    return [n for n in names if isinstance(n, str)]
