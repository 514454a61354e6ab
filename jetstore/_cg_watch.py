"""``jetstore cg watch-group create|delete`` and ``jetstore cg watch``: KV watch groups, a
bucket's changes shared among members, each key's changes to one member at a time. A watch
group is an elastic group on the bucket's stream ``KV_<bucket>``: ``cg elastic info|add|drop
KV_<bucket> GROUP ...`` manage it."""

from __future__ import annotations

import contextlib
import sys
from datetime import timedelta

import click

import jetstream
import kvstore
import pcgroups

from ._cg_admin import show_group
from ._cg_consume import ack_options, consumer_template, waiting_note
from ._cg_fields import group_fields
from ._confirm import confirm
from ._connect import Settings, run, verb
from ._fields import entry_fields
from ._habits import VerbGroup
from ._kv_read import _line
from ._output import emit_json_line, note
from ._values import size_option

__all__ = ["watch", "watch_group"]


@click.group("watch-group", cls=VerbGroup)
def watch_group() -> None:
    """KV watch groups: create, delete (members: cg elastic add|drop KV_<bucket> GROUP)."""


@watch_group.command("create")
@click.argument("bucket")
@click.argument("group")
@click.argument("max_members", type=click.IntRange(min=1))
@click.argument("members", nargs=-1)
@click.option("--max-buffered-msgs", type=click.IntRange(min=0), default=0, help="0 = no limit.")
@click.option("--max-buffered-bytes", callback=size_option, default="0", help="0 = no limit.")
@verb
def create(
    settings: Settings,
    bucket: str,
    group: str,
    max_members: int,
    members: tuple[str, ...],
    max_buffered_msgs: int,
    max_buffered_bytes: int,
) -> None:
    """Share BUCKET's changes among MAX_MEMBERS partitions of keys; add MEMBERS."""

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        config = await pcgroups.create_bucket_group(
            opened,
            group,
            max_members=max_members,
            members=members,
            max_buffered_msgs=max_buffered_msgs,
            max_buffered_bytes=max(max_buffered_bytes, 0),
        )
        show_group(group_fields("elastic", opened.stream, group, config), settings)

    run(settings, work)


@watch_group.command("delete")
@click.argument("bucket")
@click.argument("group")
@click.option("--force", "-f", is_flag=True, help="Do not ask.")
@verb
def delete(settings: Settings, bucket: str, group: str, force: bool) -> None:
    """Delete a watch group (the bucket stays; members stop)."""
    confirm(force, f"delete watch group {group!r} on bucket {bucket!r} (its members stop)?")

    async def work(js: jetstream.JetStream) -> None:
        await pcgroups.delete_bucket_group(await kvstore.open_bucket(js, bucket), group)
        note(f"deleted watch group {group}", json=settings.json, quiet=settings.quiet)

    run(settings, work)


@click.command("watch")
@click.argument("bucket")
@click.argument("group")
@click.argument("member")
@ack_options
@verb
def watch(
    settings: Settings,
    bucket: str,
    group: str,
    member: str,
    count: int | None,
    ack: bool,
    ack_wait: timedelta | None,
    max_ack_pending: int,
    confirm_acks: bool,
) -> None:
    """Process BUCKET's changes as MEMBER of watch group GROUP: a line per change as `kv
    watch` prints it (--json: entry fields and `partition`), until Ctrl-C or --count."""
    template = consumer_template(ack_wait, max_ack_pending)
    colour = sys.stdout.isatty()

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        unacked: list[pcgroups.KeyChange] = []
        try:
            watching = pcgroups.watch_group(
                opened, group, member, config=template, confirm_acks=confirm_acks
            )
            async with watching as changes:
                waiting_note(member, changes.partitions, settings.quiet)
                seen = 0
                async for change in changes:
                    _print(change, settings, colour)
                    if ack:
                        await change.ack()
                    else:
                        unacked.append(change)
                    seen += 1
                    if count is not None and seen >= count:
                        break
        finally:  # given back once stopped (see consume)
            with contextlib.suppress(jetstream.JetStreamError):
                for change in unacked:
                    await change.nak()

    run(settings, work, interrupt_ok=True)


def _print(change: pcgroups.KeyChange, settings: Settings, colour: bool) -> None:
    if settings.json:
        emit_json_line({**entry_fields(change.entry), "partition": change.partition})
    elif not settings.quiet:
        click.echo(_line(change.entry, colour=colour))
