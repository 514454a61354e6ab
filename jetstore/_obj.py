"""``jetstore obj``: object stores (names as natscli's ``nats obj``); transfers in
:mod:`jetstore._transfer`."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncGenerator
from datetime import timedelta
from typing import Any, cast

import click

import jetstream
import objstore
from jetstream._protocol.ttl import parse_ttl

from ._confirm import confirm
from ._connect import Settings, run, verb
from ._fields import object_fields, store_fields
from ._habits import VerbGroup
from ._output import emit_json, emit_json_line, note, show_fields
from ._shown import shown
from ._transfer import download, plan_uploads, report_skipped, upload
from ._values import duration_option, pairs, size_option

__all__ = ["obj"]

# natscli asks before it replaces an object or a file, unless -f; jetstore replaces both (a
# file only once the whole object arrived, its digest verified).
_never_asks = click.option("--force", "-f", is_flag=True, hidden=True, expose_value=False)


@click.group(
    cls=VerbGroup,
    aliases={"del": "rm", "show": "info", "i": "info"},
    not_ours={"edit": "jetstore has no `obj edit`: objstore.update_store changes a store's config"},
)
def obj() -> None:
    """Object stores: add, info, ls, rm; put, get (progress bars), link, watch, seal, cleanup."""


@obj.command("add")
@click.argument("store")
@click.option(
    "--max-age",
    "--ttl",
    "max_age",
    callback=duration_option,
    help="Lifetime of every object (e.g. 30d).",
)
@click.option(
    "--marker-ttl",
    callback=duration_option,
    help="Expiry markers, so watchers see expiries (see docs).",
)
@click.option(
    "--max-bytes",
    "--max-bucket-size",
    "max_bytes",
    callback=size_option,
    default="-1",
    help="Largest store size (-1 = unlimited).",
)
@click.option("--storage", type=click.Choice(["file", "memory"]), default="file", show_default=True)
@click.option("--replicas", type=click.IntRange(1, 5), default=1, show_default=True)
@click.option("--compression", "--compress", is_flag=True, help="S2-compress stored chunks.")
@click.option("--description", default="", help="Free text.")
@click.option(
    "--metadata", multiple=True, metavar="NAME=VALUE", help="Store metadata (repeatable)."
)
@verb
def add(settings: Settings, store: str, metadata: tuple[str, ...], **config: Any) -> None:
    """Create an object store (fast-ingest uploads, per-object TTL) and show it."""
    config["metadata"] = pairs(metadata, "--metadata")

    async def work(js: jetstream.JetStream) -> None:
        created = await objstore.create_store(js, store, **config)
        show_fields(store_fields(await created.status()), json=settings.json, quiet=settings.quiet)

    run(settings, work)


@obj.command("info")
@click.argument("store", required=False, metavar="STORE")
@click.argument("name", required=False)
@verb
def info(settings: Settings, store: str | None, name: str | None) -> None:
    """Show a store (or, with NAME, an object's meta record)."""
    if store is None:  # natscli asks which; a script cannot answer
        raise click.UsageError("name the store: `jetstore obj ls` lists them")

    async def work(js: jetstream.JetStream) -> None:
        opened = await objstore.open_store(js, store)
        if name is None:
            show_fields(
                store_fields(await opened.status()), json=settings.json, quiet=settings.quiet
            )
        else:
            show_fields(
                object_fields(await opened.info(name)), json=settings.json, quiet=settings.quiet
            )

    run(settings, work)


@obj.command("ls")
@click.argument("store", required=False)
@click.option("--include-deleted", is_flag=True, help="Deleted objects too.")
@click.option(
    "--names", "-n", is_flag=True, hidden=True, expose_value=False
)  # natscli's: all ls prints
@verb
def ls(settings: Settings, store: str | None, include_deleted: bool) -> None:
    """List stores, or the objects of STORE (name, size, modified, digest; tab-separated)."""

    async def work(js: jetstream.JetStream) -> None:
        if store is None:
            names = sorted([name async for name in objstore.list_stores(js)])
            _list(names, json=settings.json)
            return
        opened = await objstore.open_store(js, store)
        infos = [i async for i in opened.list(include_deleted=include_deleted)]
        if settings.json:
            emit_json([object_fields(i) for i in infos])
            return
        for i in infos:
            link = f"\t-> {shown(i.link.bucket)}/{shown(i.link.name)}" if i.link else ""
            fields = object_fields(i)
            columns = (shown(i.name), i.size, fields["modified"] or "-", shown(i.digest))
            click.echo("\t".join(str(column) for column in columns) + link)

    run(settings, work)


def _list(names: list[str], *, json: bool) -> None:
    if json:
        emit_json(names)
    else:
        for name in names:
            click.echo(shown(name))


@obj.command("rm")
@click.argument("store")
@click.argument("names", nargs=-1)
@click.option("--force", "-f", is_flag=True, help="Do not ask.")
@verb
def rm(settings: Settings, store: str, names: tuple[str, ...], force: bool) -> None:
    """Delete objects NAMES, or (without NAMES) the whole store."""
    what = f"objects {', '.join(names)} of store {store!r}" if names else f"store {store!r}"
    confirm(force, f"delete {what}?")

    async def work(js: jetstream.JetStream) -> None:
        if not names:
            await objstore.delete_store(js, store)
            note(f"deleted store {store}", json=settings.json, quiet=settings.quiet)
            return
        opened = await objstore.open_store(js, store)
        for name in names:
            await opened.delete(name)
            note(f"deleted {name}", json=settings.json, quiet=settings.quiet)

    run(settings, work)


@obj.command("put")
@click.argument("store")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, allow_dash=True))
@click.option("--name", help="Object name (one file or stdin; default: the file's name).")
@click.option("--prefix", default="", help="Prepended to every object name (e.g. 'logs/').")
@click.option("--ttl", help="Object TTL: seconds, 1h, 30d or never.")
@click.option("--meta", multiple=True, metavar="NAME=VALUE", help="Object metadata (repeatable).")
@click.option("--description", default="", help="Object description.")
@click.option(
    "--parallel",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Uploads at a time.",
)
@click.option(
    "--follow-links",
    is_flag=True,
    help="In directories, follow symbolic links that lead out of them or to directories.",
)
@_never_asks
@verb
def put(
    settings: Settings,
    store: str,
    paths: tuple[str, ...],
    name: str | None,
    prefix: str,
    ttl: str | None,
    meta: tuple[str, ...],
    description: str,
    parallel: int,
    follow_links: bool,
) -> None:
    """Upload files, directories (recursively; names relative to the directory) or stdin
    (-, with --name). A bar per file and an overall bar on a terminal; a result line per
    object when piped. In a directory, only regular files and links to them inside it are
    taken; every other entry (links out or to directories, dangling links, FIFOs, sockets,
    devices) is skipped with a line on stderr. Exit 1 if any upload failed or anything was
    skipped (the others are kept). No PATHS with --name: stdin, as natscli reads it."""
    if not paths:
        if name is None:
            raise click.UsageError("name the files to upload, or - (stdin) with --name")
        paths = ("-",)
    if ttl is not None:
        _check_ttl(ttl)
    options = {"ttl": ttl, "meta": pairs(meta, "--meta") or None, "description": description}
    plan = plan_uploads(paths, name, prefix, follow_links=follow_links)
    report_skipped(plan)
    run(settings, lambda js: upload(settings, js, store, plan, options, parallel))


def _check_ttl(ttl: str) -> None:
    """Refuse a bad --ttl before connecting (exit 2), not once per file."""
    try:
        parse_ttl(ttl)
    except jetstream.InvalidTTLError as exc:
        raise click.BadParameter(str(exc), param_hint="--ttl") from None


@obj.command("get")
@click.argument("store")
@click.argument("names", nargs=-1)
@click.option(
    "--output",
    "-o",
    "-O",
    help="A file, a directory, or - for stdout (default: the object's base name here; "
    "the current directory for several).",
)
@click.option(
    "--all", "all_objects", is_flag=True, help="Every object of the store (links left out)."
)
@click.option(
    "--parallel",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Downloads at a time.",
)
@_never_asks
@verb
def get(
    settings: Settings,
    store: str,
    names: tuple[str, ...],
    output: str | None,
    all_objects: bool,
    parallel: int,
) -> None:
    """Download objects, digest verified; files appear only once complete and verified.
    Into a directory, an object 'a/b.txt' becomes DIR/a/b.txt."""
    if not names and not all_objects:
        raise click.UsageError("name an object, or give --all")
    if names and all_objects:
        raise click.UsageError("give object names or --all, not both")
    if output == "-" and (all_objects or len(names) > 1):
        raise click.UsageError("-o - (stdout) takes one object")
    run(
        settings,
        lambda js: download(settings, js, store, list(names), output, all_objects, parallel),
    )


@obj.command("link")
@click.argument("store")
@click.argument("name")
@click.argument("target")
@verb
def link(settings: Settings, store: str, name: str, target: str) -> None:
    """Make NAME a link to object TARGET of the store (reads of NAME follow it)."""

    async def work(js: jetstream.JetStream) -> None:
        opened = await objstore.open_store(js, store)
        show_fields(
            object_fields(await opened.add_link(name, target)),
            json=settings.json,
            quiet=settings.quiet,
        )

    run(settings, work)


@obj.command("watch")
@click.argument("store")
@click.option("--include-history", is_flag=True, help="Every stored meta record first.")
@click.option("--updates-only", is_flag=True, help="Only changes from now on.")
@click.option("--count", type=click.IntRange(min=1), help="Stop after this many changes.")
@verb
def watch(
    settings: Settings, store: str, include_history: bool, updates_only: bool, count: int | None
) -> None:
    """Print puts, deletes (DEL) and expiries (EXPIRED) as they happen (current objects first),
    until Ctrl-C or --count."""
    colour = sys.stdout.isatty()

    async def work(js: jetstream.JetStream) -> None:
        opened = await objstore.open_store(js, store)
        changes = cast(
            AsyncGenerator[objstore.ObjectInfo, None],
            opened.watch(include_history=include_history, updates_only=updates_only),
        )
        seen = 0
        async with contextlib.aclosing(changes):
            async for change in changes:
                if settings.json:
                    emit_json_line(object_fields(change))
                else:
                    click.echo(_change_line(change, colour))
                seen += 1
                if count is not None and seen >= count:
                    break

    run(settings, work, interrupt_ok=True)


_COLOURS = {"PUT": "green", "LINK": "cyan", "DEL": "yellow", "EXPIRED": "magenta"}


def _change_line(change: objstore.ObjectInfo, colour: bool) -> str:
    op = (
        "EXPIRED"
        if change.expired
        else "DEL"
        if change.deleted
        else "LINK"
        if change.is_link
        else "PUT"
    )
    op_text = click.style(f"{op:<7}", fg=_COLOURS[op]) if colour else f"{op:<7}"
    when = change.mtime.astimezone().strftime("%Y-%m-%d %H:%M:%S") if change.mtime else "-"
    size = f" {change.size} bytes" if op == "PUT" else ""
    return f"[{when}] {op_text} {shown(change.name)}{size}"


@obj.command("seal")
@click.argument("store")
@click.option("--force", "-f", is_flag=True, help="Do not ask.")
@verb
def seal(settings: Settings, store: str, force: bool) -> None:
    """Make STORE read-only, for good."""
    confirm(force, f"seal store {store!r} (read-only for good)?")

    async def work(js: jetstream.JetStream) -> None:
        opened = await objstore.open_store(js, store)
        await opened.seal()
        note(f"sealed store {store}", json=settings.json, quiet=settings.quiet)

    run(settings, work)


@obj.command("cleanup")
@click.argument("store")
@click.option(
    "--older-than",
    callback=duration_option,
    default="1m",
    show_default=True,
    help="Leave chunks newer than this (uploads in progress).",
)
@verb
def cleanup(settings: Settings, store: str, older_than: timedelta) -> None:
    """Remove chunks no object refers to (left by a crashed uploader); prints how many
    objects' chunks were removed."""

    async def work(js: jetstream.JetStream) -> None:
        opened = await objstore.open_store(js, store)
        removed = await opened.cleanup(older_than=older_than)
        if settings.json:
            emit_json({"removed": removed})
        elif not settings.quiet:
            click.echo(f"removed the chunks of {removed} unreferenced objects")

    run(settings, work)
