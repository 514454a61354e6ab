"""``jetstore cg static|elastic`` verbs both kinds share: ls, info, delete, active,
step-down (names as orbit's ``cg`` tool). Each factory makes the verb for one kind."""

from __future__ import annotations

import click

import jetstream

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
            _names(await kind.names(js, stream), settings)

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


def admin_verbs(kind: Kind) -> list[click.Command]:
    """The shared verbs of ``jetstore cg <kind>``."""
    return [make(kind) for make in (_ls, _info, _delete, _active, _step_down)]
