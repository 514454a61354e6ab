"""``jetstore cg static|elastic`` verbs both kinds share: ls, info, delete, active,
step-down (names as orbit's ``cg`` tool), status. Each factory makes the verb for one kind."""

from __future__ import annotations

from typing import Any

import click
import msgspec

import jetstream
import pcgroups

from ._cg_fields import group_fields, group_lines
from ._cg_kinds import Kind
from ._confirm import confirm
from ._connect import Settings, run, verb
from ._output import emit_json, note
from ._shown import shown

__all__ = ["admin_verbs", "show_group"]


def show_group(fields: dict[str, object], settings: Settings) -> None:
    """A group document: indented JSON, or ``name: value`` lines."""
    if settings.json:
        emit_json(fields)
    elif not settings.quiet:
        for line in group_lines(fields):
            click.echo(line)


def _names(names: list[str], settings: Settings) -> None:
    if settings.json:
        emit_json(names)
    else:
        for name in names:
            click.echo(shown(name))


def _ls(kind: Kind) -> click.Command:
    @click.command("ls")
    @click.argument("stream")
    @verb
    def ls(settings: Settings, stream: str) -> None:
        """The groups on STREAM, one a line (--json: a list)."""

        async def work(js: jetstream.JetStream) -> None:
            _names([name async for name in kind.names(js, stream)], settings)

        run(settings, work)

    ls.help = f"The {kind.name} groups on STREAM, one a line (--json: a list)."
    return ls


def _info(kind: Kind) -> click.Command:
    @click.command("info")
    @click.argument("stream")
    @click.argument("group")
    @verb
    def info(settings: Settings, stream: str, group: str) -> None:
        """A group's config, the partitions of each member and the active members."""

        async def work(js: jetstream.JetStream) -> None:
            fields = group_fields(kind.name, stream, group, await kind.config(js, stream, group))
            fields["active"] = await kind.active(js, stream, group)
            show_group(fields, settings)

        run(settings, work)

    return info


def _delete(kind: Kind) -> click.Command:
    @click.command("delete")
    @click.argument("stream")
    @click.argument("group")
    @click.option("--force", "-f", is_flag=True, help="Do not ask.")
    @verb
    def delete(settings: Settings, stream: str, group: str, force: bool) -> None:
        """Delete a group (its members stop consuming)."""
        confirm(force, f"delete {kind.name} group {group!r} on {stream!r} (its members stop)?")

        async def work(js: jetstream.JetStream) -> None:
            await kind.delete(js, stream, group)
            note(f"deleted {kind.name} group {group}", json=settings.json, quiet=settings.quiet)

        run(settings, work)

    return delete


def _active(kind: Kind) -> click.Command:
    @click.command("active")
    @click.argument("stream")
    @click.argument("group")
    @verb
    def active(settings: Settings, stream: str, group: str) -> None:
        """The members with a running instance, one a line (--json: a list)."""

        async def work(js: jetstream.JetStream) -> None:
            _names(await kind.active(js, stream, group), settings)

        run(settings, work)

    return active


def _step_down(kind: Kind) -> click.Command:
    @click.command("step-down")
    @click.argument("stream")
    @click.argument("group")
    @click.argument("member")
    @verb
    def step_down(settings: Settings, stream: str, group: str, member: str) -> None:
        """Unpin MEMBER's current instance: another instance of it takes over."""

        async def work(js: jetstream.JetStream) -> None:
            await kind.step_down(js, stream, group, member)
            note(f"{member} stepped down", json=settings.json, quiet=settings.quiet)

        run(settings, work)

    return step_down


def status_fields(status: pcgroups.GroupStatus) -> dict[str, Any]:
    """A group status's documented fields, ``stranded`` as the partitions' numbers."""
    fields: dict[str, Any] = msgspec.to_builtins(status)
    fields["stranded"] = [p.partition for p in status.stranded]
    return fields


def status_lines(status: pcgroups.GroupStatus) -> list[str]:
    """A line per partition, then what is stranded, unselected or mismatched (escaped)."""
    lines = []
    for p in status.partitions:
        owner = "no member" if p.member is None else shown(p.member)
        state = "consuming" if p.consuming else "not consuming"
        waiting = "?" if p.waiting is None else str(p.waiting)
        lines.append(f"partition {p.partition}: {owner}, {state}, {waiting} waiting")
    stranded = status.stranded
    counts = [p.waiting for p in stranded]
    held = "" if not stranded or None in counts else f" ({sum(c or 0 for c in counts)} waiting)"
    lines.append(f"stranded: {', '.join(str(p.partition) for p in stranded) or '-'}{held}")
    unselected = "?" if status.unselected is None else str(status.unselected)
    lines.append(f"unselected: {unselected}")
    if status.unjoinable:
        lines.append(f"unjoinable: {', '.join(shown(name) for name in status.unjoinable)}")
    if status.mismatch is not None:
        lines.append(f"mismatch: {shown(status.mismatch)}")
    return lines


def _status(kind: Kind) -> click.Command:
    @click.command("status")
    @click.argument("stream")
    @click.argument("group")
    @verb
    def status(settings: Settings, stream: str, group: str) -> None:
        """Which partitions no member works on (stranded) and what waits in each; messages
        no filter selects; a config that disagrees with the stream's partitioning."""

        async def work(js: jetstream.JetStream) -> None:
            found = await kind.status(js, stream, group)
            if settings.json:
                emit_json(status_fields(found))
            elif not settings.quiet:
                for line in status_lines(found):
                    click.echo(line)

        run(settings, work)

    return status


def admin_verbs(kind: Kind) -> list[click.Command]:
    """The shared verbs of ``jetstore cg <kind>``."""
    return [make(kind) for make in (_ls, _info, _delete, _active, _step_down, _status)]
