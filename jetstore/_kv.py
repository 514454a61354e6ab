"""``jetstore kv``: KV buckets (names as natscli's ``nats kv``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

import jetstream
import kvstore
from jetstream import TTLValue

from ._confirm import confirm
from ._connect import Settings, run, verb
from ._fields import bucket_fields, entry_fields, text_of
from ._output import emit_json, emit_json_line
from ._records import Record, format_of, parse_records
from ._values import duration_option, pairs, read_value, size_option

__all__ = ["kv"]

_OP_COLOURS = {"PUT": "green", "DEL": "yellow", "PURGE": "red", "EXPIRED": "magenta"}


@click.group()
def kv() -> None:
    """KV buckets: add, info, ls, rm; put, create, update, get, del, purge; history, keys,
    watch; put-many, get-many."""


# -- buckets ---------------------------------------------------------------------------------


@kv.command("add")
@click.argument("bucket")
@click.option(
    "--history",
    type=click.IntRange(1, kvstore.MAX_HISTORY),
    default=1,
    show_default=True,
    help="Revisions kept per key.",
)
@click.option(
    "--max-age",
    "--ttl",
    "max_age",
    callback=duration_option,
    help="Lifetime of every value (e.g. 30d).",
)
@click.option(
    "--marker-ttl", callback=duration_option, help="Leave expiry markers (Op EXPIRED) this long."
)
@click.option(
    "--max-value-size",
    callback=size_option,
    default="-1",
    help="Largest value (e.g. 1MiB; -1 = server max).",
)
@click.option(
    "--max-bytes", callback=size_option, default="-1", help="Largest bucket size (-1 = unlimited)."
)
@click.option("--storage", type=click.Choice(["file", "memory"]), default="file", show_default=True)
@click.option("--replicas", type=click.IntRange(1, 5), default=1, show_default=True)
@click.option("--compression", is_flag=True, help="S2-compress stored values.")
@click.option("--description", default="", help="Free text.")
@click.option(
    "--metadata", multiple=True, metavar="NAME=VALUE", help="Bucket metadata (repeatable)."
)
@verb
def add(settings: Settings, bucket: str, metadata: tuple[str, ...], **config: Any) -> None:
    """Create a bucket (with per-key TTL and atomic batches) and show it."""
    config["metadata"] = pairs(metadata, "--metadata")

    async def work(js: jetstream.JetStream) -> None:
        created = await kvstore.create_bucket(js, bucket, **config)
        _show_bucket(settings, await created.status())

    run(settings, work)


@kv.command("info")
@click.argument("bucket")
@verb
def info(settings: Settings, bucket: str) -> None:
    """Show a bucket's configuration and size."""

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        _show_bucket(settings, await opened.status())

    run(settings, work)


def _show_bucket(settings: Settings, status: kvstore.BucketStatus) -> None:
    fields = bucket_fields(status)
    if settings.json:
        emit_json(fields)
    elif not settings.quiet:
        for name, value in fields.items():
            click.echo(f"{name}: {_plain(value)}")


def _plain(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
    return str(value).lower() if isinstance(value, bool) else str(value)


@kv.command("ls")
@verb
def ls(settings: Settings) -> None:
    """List buckets (names; with --json, each bucket's info)."""

    async def work(js: jetstream.JetStream) -> None:
        names = sorted([name async for name in kvstore.list_buckets(js)])
        if not settings.json:
            for name in names:
                click.echo(name)
            return
        statuses = []
        for name in names:
            statuses.append(bucket_fields(await (await kvstore.open_bucket(js, name)).status()))
        emit_json(statuses)

    run(settings, work)


@kv.command("rm")
@click.argument("bucket")
@click.option("--force", "-f", is_flag=True, help="Do not ask.")
@verb
def rm(settings: Settings, bucket: str, force: bool) -> None:
    """Delete a bucket and all its keys."""
    confirm(force, f"delete bucket {bucket!r} and all its keys?")

    async def work(js: jetstream.JetStream) -> None:
        await kvstore.delete_bucket(js, bucket)
        _note(settings, f"deleted bucket {bucket}")

    run(settings, work)


def _note(settings: Settings, line: str) -> None:
    if not settings.quiet and not settings.json:
        click.echo(line)


# -- writes ------------------------------------------------------------------------------------


def checked(
    *, key: str | None = None, ttl: str | None = None, filters: tuple[str, ...] = ()
) -> None:
    """Refuse a bad key, filter or TTL before connecting (exit 2; nothing is sent, and a
    missing bucket does not hide the mistake).

    Raises:
        click.UsageError: names the library's error class and its message.
    """
    try:
        if key is not None:
            kvstore.validate_key(key)
        for pattern in filters:
            kvstore.validate_filter(pattern)
        if ttl is not None:
            jetstream.parse_ttl(ttl)
    except jetstream.ClientValidationError as exc:
        raise click.UsageError(f"{type(exc).__name__}: {exc}") from None


_value_arg = click.argument("value", required=False)
_file_opt = click.option(
    "--file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read the value from this file (else VALUE, or stdin).",
)
_ttl_opt = click.option("--ttl", help="Key TTL: seconds, 90s, 1h, 30d or never.")


def _wrote(settings: Settings, key: str, revision: int) -> None:
    if settings.json:
        emit_json({"key": key, "revision": revision})
    elif not settings.quiet:
        click.echo(revision)


@kv.command("put")
@click.argument("bucket")
@click.argument("key")
@_value_arg
@_file_opt
@_ttl_opt
@verb
def put(
    settings: Settings, bucket: str, key: str, value: str | None, file: Path | None, ttl: str | None
) -> None:
    """Store VALUE (or --file, or stdin) under KEY; prints the new revision."""
    checked(key=key, ttl=ttl)
    data = read_value(value, file)

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        _wrote(settings, key, await opened.put(key, data, ttl=ttl))

    run(settings, work)


@kv.command("create")
@click.argument("bucket")
@click.argument("key")
@_value_arg
@_file_opt
@_ttl_opt
@verb
def create(
    settings: Settings, bucket: str, key: str, value: str | None, file: Path | None, ttl: str | None
) -> None:
    """Store a value only if KEY has no live value (exit 1 if it has)."""
    checked(key=key, ttl=ttl)
    data = read_value(value, file)

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        _wrote(settings, key, await opened.create(key, data, ttl=ttl))

    run(settings, work)


@kv.command("update")
@click.argument("bucket")
@click.argument("key")
@_value_arg
@_file_opt
@_ttl_opt
@click.option(
    "--revision", type=click.IntRange(min=0), required=True, help="Expected current revision."
)
@verb
def update(
    settings: Settings,
    bucket: str,
    key: str,
    value: str | None,
    file: Path | None,
    ttl: str | None,
    revision: int,
) -> None:
    """Compare-and-set: store only if KEY is at --revision (exit 1 naming the current one)."""
    checked(key=key, ttl=ttl)
    data = read_value(value, file)

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        _wrote(settings, key, await opened.update(key, data, revision, ttl=ttl))

    run(settings, work)


@kv.command("del")
@click.argument("bucket")
@click.argument("key")
@click.option("--revision", type=click.IntRange(min=0), help="Only if KEY is at this revision.")
@verb
def delete(settings: Settings, bucket: str, key: str, revision: int | None) -> None:
    """Delete KEY (a DEL tombstone; history kept); prints the tombstone's revision."""
    checked(key=key)

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        _wrote(settings, key, await opened.delete(key, revision=revision))

    run(settings, work)


@kv.command("purge")
@click.argument("bucket")
@click.argument("key")
@click.option("--ttl", help="Let the PURGE tombstone itself expire after this long.")
@click.option("--revision", type=click.IntRange(min=0), help="Only if KEY is at this revision.")
@verb
def purge(settings: Settings, bucket: str, key: str, ttl: str | None, revision: int | None) -> None:
    """Purge KEY: a PURGE tombstone, earlier revisions removed."""
    checked(key=key, ttl=ttl)

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        _wrote(settings, key, await opened.purge(key, ttl=ttl, revision=revision))

    run(settings, work)


@kv.command("put-many")
@click.argument("bucket")
@click.argument(
    "input_file", metavar="FILE", type=click.Path(exists=True, dir_okay=False, allow_dash=True)
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "jsonl", "csv"]),
    help="Input format (default: from the file suffix).",
)
@click.option("--ttl", help="One TTL for every key without its own.")
@click.option(
    "--batch-size",
    type=click.IntRange(1, 100_000),
    default=jetstream.DEFAULT_MAX_BATCH,
    show_default=True,
    help="Keys per atomic batch.",
)
@verb
def put_many(
    settings: Settings,
    bucket: str,
    input_file: str,
    fmt: str | None,
    ttl: str | None,
    batch_size: int,
) -> None:
    """Store the records of FILE (JSON, JSONL or CSV; - = stdin) in atomic batches of
    --batch-size keys: each batch all or nothing. Prints each key's revision."""
    text = sys.stdin.read() if input_file == "-" else Path(input_file).read_text()
    records = parse_records(text, format_of(input_file, fmt))
    _check_records(records, ttl)

    async def work(js: jetstream.JetStream) -> int | None:
        opened = await kvstore.open_bucket(js, bucket)
        stored: dict[str, int] = {}
        for start in range(0, len(records), batch_size):
            batch = records[start : start + batch_size]
            try:
                stored.update(await _put_batch(opened, batch, ttl))
            except jetstream.JetStreamError:
                if stored:
                    click.echo(f"jetstore: {len(stored)} keys were stored before:", err=True)
                _report_revisions(settings, stored)
                raise
        _report_revisions(settings, stored)
        return None

    run(settings, work)


def _check_records(records: list[Record], ttl: str | None) -> None:
    """Every key and TTL checked before the first batch is sent (exit 2, nothing stored)."""
    checked(ttl=ttl)
    for record in records:
        checked(key=record.key, ttl=record.ttl)


async def _put_batch(
    bucket: kvstore.Bucket, batch: list[Record], ttl: str | None
) -> dict[str, int]:
    ttls: dict[str, TTLValue] = {}
    for record in batch:
        key_ttl = record.ttl or ttl
        if key_ttl is not None:
            ttls[record.key] = key_ttl
    expect = {r.key: r.revision for r in batch if r.revision is not None}
    return await bucket.put_many(
        [(r.key, r.value) for r in batch], expect=expect, ttl=ttls, max_keys=len(batch)
    )


def _report_revisions(settings: Settings, stored: dict[str, int]) -> None:
    if settings.json:
        emit_json(stored)
    elif not settings.quiet:
        for key, revision in stored.items():
            click.echo(f"{key} {revision}")


# -- reads -------------------------------------------------------------------------------------


@kv.command("get")
@click.argument("bucket")
@click.argument("key")
@click.option("--revision", type=click.IntRange(min=1), help="This revision instead of the latest.")
@verb
def get(settings: Settings, bucket: str, key: str, revision: int | None) -> None:
    """Print KEY's value (raw bytes; --json: value and metadata). Exit 1 if it has none."""
    checked(key=key)

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        entry = await opened.get(key, revision=revision)
        if settings.json:
            emit_json(entry_fields(entry))
        else:
            sys.stdout.buffer.write(entry.value)
            sys.stdout.buffer.flush()

    run(settings, work)


@kv.command("get-many")
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
            click.echo(f"{key} {_shown(entry.value)}")
        for key in snapshot.missing:
            click.echo(f"jetstore: {key}: no value", err=True)

    run(settings, work)


def _shown(value: bytes, limit: int | None = None) -> str:
    """A value for a text line: its text (non-printables escaped), or its size if binary."""
    text = text_of(value)
    if text is None:
        return f"<{len(value)} bytes>"
    text = text.encode("unicode_escape").decode() if not text.isprintable() else text
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


@kv.command("history")
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
    shown = click.style(f"{op:<7}", fg=_OP_COLOURS.get(op)) if colour else f"{op:<7}"
    ttl = "" if entry.ttl is None else f" ttl={'never' if entry.ttl < 0 else entry.ttl}"
    value = f": {_shown(entry.value, limit)}" if entry.op is kvstore.Op.PUT else ""
    return f"[{created}] {shown} {entry.key} rev={entry.revision}{ttl}{value}"


@kv.command("keys")
@click.argument("bucket")
@click.argument("filters", nargs=-1)
@verb
def keys(settings: Settings, bucket: str, filters: tuple[str, ...]) -> None:
    """Keys with a live value, optionally matching FILTERS (e.g. 'alice.>', 'user.*.name')."""
    checked(filters=filters)

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        found = [key async for key in opened.keys(list(filters) or ">")]
        if settings.json:
            emit_json(found)
        else:
            for key in found:
                click.echo(key)

    run(settings, work)


@kv.command("watch")
@click.argument("bucket")
@click.argument("filters", nargs=-1)
@click.option("--include-history", is_flag=True, help="Every stored revision first.")
@click.option("--updates-only", is_flag=True, help="Only changes from now on.")
@click.option("--ignore-deletes", is_flag=True, help="No DEL, PURGE or EXPIRED entries.")
@click.option("--count", type=click.IntRange(min=1), help="Stop after this many entries.")
@verb
def watch(
    settings: Settings,
    bucket: str,
    filters: tuple[str, ...],
    include_history: bool,
    updates_only: bool,
    ignore_deletes: bool,
    count: int | None,
) -> None:
    """Print changes as they happen (current values first), until Ctrl-C or --count. Ops are
    coloured on a terminal: PUT, DEL, PURGE, EXPIRED (a key's TTL ran out)."""
    checked(filters=filters)
    if include_history and updates_only:
        raise click.UsageError("--include-history and --updates-only exclude each other")
    colour = sys.stdout.isatty()

    async def work(js: jetstream.JetStream) -> int | None:
        opened = await kvstore.open_bucket(js, bucket)
        watcher = opened.watch(
            list(filters) or ">",
            include_history=include_history,
            updates_only=updates_only,
            ignore_deletes=ignore_deletes,
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
