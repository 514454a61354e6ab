"""``jetstore kv`` reads: get, get-many, history, keys, watch."""

from __future__ import annotations

import sys

import click

import jetstream
import kvstore

from ._connect import Settings, run, verb
from ._fields import entry_fields
from ._output import emit_json, emit_json_line
from ._shown import shown, shown_value
from ._values import checked

__all__ = ["get", "get_many", "history", "keys", "list_keys", "watch"]

_OP_COLOURS = {"PUT": "green", "DEL": "yellow", "PURGE": "red", "EXPIRED": "magenta"}


@click.command("get")
@click.argument("bucket")
@click.argument("key")
@click.option("--revision", type=click.IntRange(min=1), help="This revision instead of the latest.")
@click.option("--raw", is_flag=True, hidden=True, expose_value=False)  # natscli's: what get prints
@verb
def get(settings: Settings, bucket: str, key: str, revision: int | None) -> None:
    """Print KEY's value (raw bytes; --json: value and metadata). Exit 1 if it has none."""
    checked(key=key)

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        entry = await opened.get(key, revision=revision)
        if settings.json:
            emit_json(entry_fields(entry))
        elif sys.stdout.isatty():
            click.echo(_on_terminal(entry.value))
        else:
            sys.stdout.buffer.write(entry.value)
            sys.stdout.buffer.flush()

    run(settings, work)


@click.command("get-many")
@click.argument("bucket")
@click.argument("keys", nargs=-1, required=True)
@verb
def get_many(settings: Settings, bucket: str, keys: tuple[str, ...]) -> None:
    """Read KEYS as of one point in time (never half of a put-many). Prints `key value` lines
    (missing keys on stderr); --json: revision, entries, missing."""
    for key in keys:
        checked(key=key)

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        snapshot = await opened.get_many(keys)
        if settings.json:
            entries = [entry_fields(entry) for entry in snapshot.values()]
            emit_json(
                {
                    "revision": snapshot.revision,
                    "entries": entries,
                    "missing": list(snapshot.missing),
                }
            )
            return
        for key, entry in snapshot.items():
            click.echo(f"{shown(key)} {shown_value(entry.value)}")
        for key in snapshot.missing:
            click.echo(f"jetstore: {shown(key)}: no value", err=True)

    run(settings, work)


def _on_terminal(value: bytes) -> str:
    """A value shown on a terminal: its lines, with whatever would drive the terminal
    escaped (bytes that are not UTF-8 as ``\\xNN``). Piped, the bytes go out as they are."""
    return shown(value.decode("utf-8", "surrogateescape"), lines=True).removesuffix("\n")


@click.command("history")
@click.argument("bucket")
@click.argument("key")
@verb
def history(settings: Settings, bucket: str, key: str) -> None:
    """Every stored revision of KEY, oldest first (tombstones and expiry markers included)."""
    checked(key=key)

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        entries = [entry async for entry in opened.history(key)]
        if settings.json:
            emit_json([entry_fields(entry) for entry in entries])
            return
        for entry in entries:
            click.echo(_line(entry, limit=60))

    run(settings, work)


def _line(entry: kvstore.Entry, *, limit: int | None = None, colour: bool = False) -> str:
    created = entry.created.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    op = entry.op.value
    op_text = click.style(f"{op:<7}", fg=_OP_COLOURS.get(op)) if colour else f"{op:<7}"
    ttl = "" if entry.ttl is None else f" ttl={'never' if entry.ttl < 0 else entry.ttl}"
    value = f": {shown_value(entry.value, limit)}" if entry.op is kvstore.Op.PUT else ""
    return f"[{created}] {op_text} {shown(entry.key)} rev={entry.revision}{ttl}{value}"


@click.command("keys")
@click.argument("bucket")
@click.argument("filters", nargs=-1)
@verb
def keys(settings: Settings, bucket: str, filters: tuple[str, ...]) -> None:
    """Keys with a live value, optionally matching FILTERS (e.g. 'alice.>', 'user.*.name')."""
    list_keys(settings, bucket, filters)


def list_keys(settings: Settings, bucket: str, filters: tuple[str, ...]) -> None:
    """Print the keys of ``bucket`` with a live value matching ``filters`` (all if none), one
    a line, or a JSON list: ``kv keys``, and ``kv ls BUCKET`` as natscli spells it.

    Raises:
        click.exceptions.Exit: always, carrying the exit code.
    """
    checked(filters=filters)

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        found = [key async for key in opened.keys(list(filters) or ">")]
        if settings.json:
            emit_json(found)
        else:
            for key in found:
                click.echo(shown(key))

    run(settings, work)


@click.command("watch")
@click.argument("bucket")
@click.argument("filters", nargs=-1)
@click.option("--include-history", "--history", is_flag=True, help="Every stored revision first.")
@click.option("--updates-only", "--updates", is_flag=True, help="Only changes from now on.")
@click.option(
    "--ignore-deletes", "--no-deletes", is_flag=True, help="No DEL, PURGE or EXPIRED entries."
)
@click.option("--deletes", is_flag=True, hidden=True, help="natscli's; the default.")
@click.option("--revision", type=click.IntRange(min=1), help="Start at this revision.")
@click.option("--count", type=click.IntRange(min=1), help="Stop after this many entries.")
@verb
def watch(
    settings: Settings,
    bucket: str,
    filters: tuple[str, ...],
    include_history: bool,
    updates_only: bool,
    ignore_deletes: bool,
    deletes: bool,
    revision: int | None,
    count: int | None,
) -> None:
    """Print changes as they happen (current values first), until Ctrl-C or --count. Ops are
    coloured on a terminal: PUT, DEL, PURGE, EXPIRED (a key's TTL ran out)."""
    checked(filters=filters)
    if include_history and updates_only:
        raise click.UsageError("--include-history and --updates-only exclude each other")
    if revision is not None and updates_only:
        raise click.UsageError("--revision and --updates-only exclude each other")
    if deletes and ignore_deletes:
        raise click.UsageError("--deletes and --ignore-deletes exclude each other")
    colour = sys.stdout.isatty()

    async def work(js: jetstream.JetStream) -> int | None:
        opened = await kvstore.open_bucket(js, bucket)
        watcher = opened.watch(
            list(filters) or ">",
            include_history=include_history,
            updates_only=updates_only,
            ignore_deletes=ignore_deletes,
            resume_from=revision,
        )
        seen = 0
        async with watcher:
            async for entry in watcher:
                if settings.json:
                    emit_json_line(entry_fields(entry))
                else:
                    click.echo(_line(entry, colour=colour))
                seen += 1
                if count is not None and seen >= count:
                    break
        return None

    run(settings, work, interrupt_ok=True)
