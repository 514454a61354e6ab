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
from ._cg_fields import group_fields, mapping_option, parse_mapping, partitioning_option
from ._cg_kinds import ELASTIC, STATIC
from ._cg_watch import watch, watch_group
from ._connect import Settings, run, verb
from ._habits import VerbGroup, positionals
from ._values import size_option

__all__ = ["cg"]


# orbit's cg tool: its names of our verbs, and its verbs we have none for.
_ORBIT_ALIASES = {
    "list": "ls",
    "rm": "delete",
    "stepdown": "step-down",
    "sd": "step-down",
    "join": "consume",
}
_MAPPING_ALIASES = {
    **{name: "mappings set" for name in ("create-mapping", "cm", "createmapping")},
    **{name: "mappings delete" for name in ("delete-mapping", "dm", "deletemapping")},
}


def _not_ours(kind: str) -> dict[str, str]:
    member_info = (
        f"jetstore has no `member-info`: `jetstore cg {kind} info STREAM GROUP` shows each "
        "member's partitions and the active members"
    )
    return {
        **{name: member_info for name in ("member-info", "memberinfo", "minfo")},
        "prompt": f"jetstore has no interactive prompt: see `jetstore cg {kind} --help`",
    }


@click.group(cls=VerbGroup)
def cg() -> None:
    """Partitioned consumer groups (orbit.go's pcgroups): static, elastic; KV watch groups
    (watch-group, watch)."""


@click.group(cls=VerbGroup, aliases=_ORBIT_ALIASES, not_ours=_not_ours("static"), habits_of="orbit")
def static() -> None:
    """Static groups (the stream's subjects start with the partition number): create, delete,
    ls, info, active, step-down, consume."""


@click.group(
    cls=VerbGroup,
    aliases={**_ORBIT_ALIASES, **_MAPPING_ALIASES},
    not_ours=_not_ours("elastic"),
    habits_of="orbit",
)
def elastic() -> None:
    """Elastic groups (membership changes while they run): create, delete, ls, info, add,
    drop, mappings, active, step-down, consume."""


class _StaticCreate(click.Command):
    """``static create``, which also takes orbit's shapes: ``create balanced STREAM GROUP MAX
    MEMBER...`` and ``create mapped STREAM GROUP MAX MEMBER:P,P...``. The word is orbit's when
    the arguments after it are STREAM GROUP MAX: the third a number, the second not (ours,
    with a stream named ``balanced``, has the number second)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        where = positionals(self, args)
        if _is_orbit_shape([args[index] for index in where]):
            ctx.meta[_ORBIT_SHAPE] = args[where[0]]
            args = [*args[: where[0]], *args[where[0] + 1 :]]
        return super().parse_args(ctx, args)


_ORBIT_SHAPE = "jetstore.orbit_create_shape"


def _is_orbit_shape(found: list[str]) -> bool:
    """``balanced|mapped STREAM GROUP MAX ...``: ours would read GROUP as MAX_MEMBERS."""
    return (
        len(found) >= 4
        and found[0] in ("balanced", "mapped")
        and not _is_number(found[2])
        and _is_number(found[3])
    )


def _is_number(text: str) -> bool:
    return text.isascii() and text.isdigit()


@static.command("create", cls=_StaticCreate)
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
    --mapping), and show it. The same create again is no error. orbit's `create balanced
    STREAM GROUP MAX MEMBER...` and `create mapped STREAM GROUP MAX MEMBER:P,P...` work too."""
    if click.get_current_context().meta.get(_ORBIT_SHAPE) == "mapped":
        if mappings:
            raise click.UsageError("give the mappings as arguments or --mapping, not both")
        mappings, members = tuple(parse_mapping(text) for text in members), ()

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


@click.group(cls=VerbGroup)
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
