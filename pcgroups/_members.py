"""Which members of a group are consuming, and making one step down (unpin), for static and
elastic groups (orbit ``List*ActiveMembers``, ``*MemberStepDown``)."""

from __future__ import annotations

from jetstream import ConsumerNotFoundError, JetStream, StreamNotFoundError

from ._assign import (
    elastic_stream_name,
    static_consumer_name,
    validate_group_names,
    validate_member_name,
)
from ._elastic import read_elastic
from ._errors import MemberNotFoundError
from ._models import ElasticConfig, StaticConfig
from ._static import static_config
from ._step_down import step_down

__all__ = [
    "elastic_active_members",
    "elastic_step_down",
    "static_active_members",
    "static_step_down",
]


def _members(config: StaticConfig | ElasticConfig) -> list[str]:
    """The members named by the config: the member list, or the mapped members."""
    names = config.members or tuple(m.member for m in config.member_mappings)
    return list(dict.fromkeys(names))


async def _consumer_names(js: JetStream, stream: str) -> set[str]:
    try:
        return {name async for name in js.consumer_names(stream)}
    except StreamNotFoundError:
        return set()


async def static_active_members(js: JetStream, stream: str, group: str) -> list[str]:
    """The members of a static group whose consumer ``<group>-<member>`` exists and has a
    pull waiting (orbit: ``num_waiting != 0``), sorted.

    Raises:
        InvalidGroupNameError: bad stream or group name; nothing is sent.
        GroupNotFoundError: no such group.
        CorruptGroupConfigError: the stored config is unreadable.
    """
    config = await static_config(js, stream, group)
    existing = await _consumer_names(js, stream)
    active = []
    for member in _members(config):
        name = static_consumer_name(group, member)
        if name not in existing:
            continue
        try:
            info = await js.consumer_info(stream, name)
        except (ConsumerNotFoundError, StreamNotFoundError):
            continue  # deleted meanwhile
        if info.num_waiting:
            active.append(member)
    return sorted(active)


async def elastic_active_members(js: JetStream, stream: str, group: str) -> list[str]:
    """The members of an elastic group that have a consumer on ``<stream>-<group>`` (a
    member's consumer is deleted by the server ``ack_wait`` after its last pull), sorted.

    Raises:
        InvalidGroupNameError: bad stream or group name; nothing is sent.
        GroupNotFoundError: no such group.
        CorruptGroupConfigError: the stored config is unreadable.
    """
    validate_group_names(stream, group)
    _, config, _ = await read_elastic(js, stream, group)
    existing = await _consumer_names(js, elastic_stream_name(stream, group))
    return sorted(m for m in _members(config) if m in existing)


async def static_step_down(js: JetStream, stream: str, group: str, member: str) -> None:
    """Make the instance of ``member`` that holds the pin step down: the consumer's
    deliveries are paused until that instance has settled the messages it holds (as long as
    it acknowledges one at least every ``ack_wait``), then its priority group is unpinned and
    deliveries resume, so the next pull of any instance of that member is pinned and starts
    after them: no two instances work on one key at once, whatever ``max_ack_pending`` is.
    Returns once the pin is released.

    Raises:
        InvalidGroupNameError: a bad stream, group or member name; nothing is sent.
        GroupNotFoundError: no such group.
        MemberNotFoundError: ``member`` is not in the group.
        ConsumerNotFoundError: the member has no consumer (no instance ever ran).
    """
    validate_group_names(stream, group)
    validate_member_name(group, member)
    config = await static_config(js, stream, group)
    if member not in _members(config):
        raise MemberNotFoundError(stream, group, member)
    await step_down(js, stream, static_consumer_name(group, member))


async def elastic_step_down(js: JetStream, stream: str, group: str, member: str) -> None:
    """As :func:`static_step_down`, for the member's consumer on ``<stream>-<group>``.

    Raises:
        InvalidGroupNameError, GroupNotFoundError, MemberNotFoundError,
        ConsumerNotFoundError: as :func:`static_step_down`.
    """
    validate_group_names(stream, group)
    validate_member_name(group, member)
    _, config, _ = await read_elastic(js, stream, group)
    if member not in _members(config):
        raise MemberNotFoundError(stream, group, member)
    await step_down(js, elastic_stream_name(stream, group), member)
