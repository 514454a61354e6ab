"""What differs between static and elastic groups for ``jetstore cg``: which pcgroups calls
a verb makes. The verbs themselves are written once, for both kinds."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import jetstream
import pcgroups

__all__ = ["ELASTIC", "STATIC", "Kind"]

Config = pcgroups.StaticConfig | pcgroups.ElasticConfig


@dataclasses.dataclass(frozen=True)
class Kind:
    """The pcgroups calls of one kind of group."""

    name: str
    names: Callable[[jetstream.JetStream, str], AsyncIterator[str]]
    config: Callable[[jetstream.JetStream, str, str], Awaitable[Any]]
    delete: Callable[[jetstream.JetStream, str, str], Awaitable[None]]
    active: Callable[[jetstream.JetStream, str, str], Awaitable[list[str]]]
    step_down: Callable[[jetstream.JetStream, str, str, str], Awaitable[None]]
    consume: Callable[..., pcgroups.GroupMember]
    status: Callable[[jetstream.JetStream, str, str], Awaitable[pcgroups.GroupStatus]]


STATIC = Kind(
    name="static",
    names=pcgroups.list_static,
    config=pcgroups.static_config,
    delete=pcgroups.delete_static,
    active=pcgroups.static_active_members,
    step_down=pcgroups.static_step_down,
    consume=pcgroups.consume_static,
    status=pcgroups.static_status,
)

ELASTIC = Kind(
    name="elastic",
    names=pcgroups.list_elastic,
    config=pcgroups.elastic_config,
    delete=pcgroups.delete_elastic,
    active=pcgroups.elastic_active_members,
    step_down=pcgroups.elastic_step_down,
    consume=pcgroups.consume_elastic,
    status=pcgroups.elastic_status,
)
