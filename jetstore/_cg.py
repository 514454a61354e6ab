"""``jetstore cg``: partitioned consumer groups (names as orbit's ``cg`` tool): ``static`` and
``elastic`` groups, KV watch groups. The verbs both kinds share are in
:mod:`jetstore._cg_admin` and :mod:`jetstore._cg_consume`; watch groups in
:mod:`jetstore._cg_watch`."""

from __future__ import annotations

from typing import Any

import click

import jetstream
import pcgroups

from ._cg_admin import admin_verbs, show_group
from ._cg_consume import consume_verb
from ._cg_fields import group_fields, mapping_option, partitioning_option
from ._cg_kinds import ELASTIC, STATIC
from ._cg_watch import watch, watch_group
from ._connect import Settings, run, verb
from ._values import size_option

__all__ = ["cg"]


@click.group()
def cg() -> None:
    """Partitioned consumer groups (orbit.go's pcgroups): static, elastic; KV watch groups
    (watch-group, watch)."""


@click.group()
def static() -> None:
    """Static groups (the stream's subjects start with the partition number): create, delete,
    ls, info, active, step-down, consume."""


@click.group()
def elastic() -> None:
    """Elastic groups (membership changes while they run): create, delete, ls, info, add,
    drop, mappings, active, step-down, consume."""


@static.command("create")
@click.argument("stream")
@click.argument("group")
@click.argument("max_members", type=click.IntRange(min=1))
@click.argument("members", nargs=-1)
@click.option(
    "--mapping",
    "mappings",
    multiple=True,
    callback=mapping_option,
    metavar="MEMBER:P,P",
    help="Partitions of a member, instead of MEMBERS (repeatable; each partition once).",
)
@click.option(
    "--filter", "filters", multiple=True, help="Subject after the partition token (repeatable)."
)
@verb
def static_create(
    settings: Settings,
    stream: str,
    group: str,
    max_members: int,
    members: tuple[str, ...],
    mappings: tuple[pcgroups.MemberMapping, ...],
    filters: tuple[str, ...],
) -> None:
    """Create a static group of MAX_MEMBERS partitions on STREAM, spread over MEMBERS (or
    --mapping), and show it. The same create again is no error."""

    async def work(js: jetstream.JetStream) -> None:
        config = await pcgroups.create_static(
            js,
            stream,
            group,
            max_members=max_members,
            filters=filters,
            members=members,
            member_mappings=mappings,
        )
        show_group(group_fields("static", stream, group, config), settings)

    run(settings, work)


@elastic.command("create")
@click.argument("stream")
@click.argument("group")
@click.argument("max_members", type=click.IntRange(min=1))
@click.option(
    "--filter",
    "filters",
    multiple=True,
    callback=partitioning_option,
    metavar="SUBJECT[:W,W]",
    help="Subjects of STREAM the group takes, and the '*' tokens (1 = the first) whose "
    "values choose the partition; none = the whole subject (repeatable; default: all).",
)
@click.option("--max-buffered-msgs", type=click.IntRange(min=0), default=0, help="0 = no limit.")
@click.option("--max-buffered-bytes", callback=size_option, default="0", help="0 = no limit.")
@verb
def elastic_create(
    settings: Settings,
    stream: str,
    group: str,
    max_members: int,
    filters: tuple[pcgroups.PartitioningFilter, ...] | None,
    max_buffered_msgs: int,
    max_buffered_bytes: int,
) -> None:
    """Create an elastic group of MAX_MEMBERS partitions on STREAM (its work queue is
    STREAM-GROUP) and show it; add members with `add` or `mappings set`."""

    async def work(js: jetstream.JetStream) -> None:
        config = await pcgroups.create_elastic(
            js,
            stream,
            group,
            max_members=max_members,
            filters=filters,
            max_buffered_msgs=max_buffered_msgs,
            max_buffered_bytes=max(max_buffered_bytes, 0),
        )
        show_group(group_fields("elastic", stream, group, config), settings)

    run(settings, work)


def _membership(name: str, change: Any, what: str) -> click.Command:
    """``add``/``drop``: change the member list with compare-and-set, show the group."""

    @click.command(name)
    @click.argument("stream")
    @click.argument("group")
    @click.argument("members", nargs=-1, required=True)
    @verb
    def command(settings: Settings, stream: str, group: str, members: tuple[str, ...]) -> None:
        async def work(js: jetstream.JetStream) -> None:
            config = await change(js, stream, group, members)
            show_group(group_fields("elastic", stream, group, config), settings)

        run(settings, work)

    command.help = what
    return command


@click.group()
def mappings() -> None:
    """Elastic member mappings: set (partitions by hand), delete."""


@mappings.command("set")
@click.argument("stream")
@click.argument("group")
@click.argument("mapping", nargs=-1, required=True, callback=mapping_option)
@verb
def mappings_set(
    settings: Settings, stream: str, group: str, mapping: tuple[pcgroups.MemberMapping, ...]
) -> None:
    """Assign the partitions by hand, MEMBER:P,P each (every partition once); replaces the
    member list."""

    async def work(js: jetstream.JetStream) -> None:
        config = await pcgroups.set_member_mappings(js, stream, group, mapping)
        show_group(group_fields("elastic", stream, group, config), settings)

    run(settings, work)


@mappings.command("delete")
@click.argument("stream")
@click.argument("group")
@verb
def mappings_delete(settings: Settings, stream: str, group: str) -> None:
    """Remove the member mappings (no members until some are added)."""

    async def work(js: jetstream.JetStream) -> None:
        config = await pcgroups.delete_member_mappings(js, stream, group)
        show_group(group_fields("elastic", stream, group, config), settings)

    run(settings, work)


for _command in (*admin_verbs(STATIC), consume_verb(STATIC)):
    static.add_command(_command)
for _command in (
    *admin_verbs(ELASTIC),
    consume_verb(ELASTIC),
    _membership("add", pcgroups.add_members, "Add MEMBERS (those in stay in place)."),
    _membership("drop", pcgroups.delete_members, "Drop MEMBERS (their instances stop)."),
    mappings,
):
    elastic.add_command(_command)
for _command in (static, elastic, watch_group, watch):
    cg.add_command(_command)
