"""``jetstore kv``: KV buckets (verbs named as natscli's ``nats kv``). The bucket verbs live
here; the key verbs in :mod:`jetstore._kv_write` and :mod:`jetstore._kv_read`."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import click

import jetstream
import kvstore

from ._confirm import confirm
from ._connect import Settings, run, verb
from ._fields import bucket_fields
from ._habits import VerbGroup, unlisted_arguments
from ._kv_lock import lock
from ._kv_read import get, get_many, history, keys, list_keys, watch
from ._kv_write import create, delete, purge, put, put_many, update
from ._output import emit_json, note, show_fields
from ._shown import shown
from ._values import duration_option, pairs, size_option

__all__ = ["kv"]

_log = logging.getLogger("jetstore")


_NOT_OURS = {
    "revert": "jetstore has no `kv revert`: `jetstore kv get BUCKET KEY --revision N | "
    "jetstore kv put BUCKET KEY` stores that revision's value again",
    "edit": "jetstore has no `kv edit`: kvstore.update_bucket changes a bucket's config",
}


@click.group(
    cls=VerbGroup,
    aliases={"new": "add", "status": "info", "view": "info", "list": "ls"},
    not_ours=_NOT_OURS,
)
def kv() -> None:
    """KV buckets: add, info, ls, rm, compact; put, create, update, get, del, purge; history,
    keys, watch; put-many, get-many; lock."""


@click.command("add")
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
    "--max-bytes",
    "--max-bucket-size",
    "max_bytes",
    callback=size_option,
    default="-1",
    help="Largest bucket size (-1 = unlimited).",
)
@click.option("--storage", type=click.Choice(["file", "memory"]), default="file", show_default=True)
@click.option("--replicas", type=click.IntRange(1, 5), default=1, show_default=True)
@click.option("--compression", "--compress", is_flag=True, help="S2-compress stored values.")
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
        show_fields(bucket_fields(await created.status()), json=settings.json, quiet=settings.quiet)

    run(settings, work)


@click.command("info")
@click.argument("bucket", required=False, metavar="BUCKET")
@verb
def info(settings: Settings, bucket: str | None) -> None:
    """Show a bucket's configuration and size."""
    if bucket is None:  # natscli asks which; a script cannot answer
        raise click.UsageError("name the bucket: `jetstore kv ls` lists them")

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        show_fields(bucket_fields(await opened.status()), json=settings.json, quiet=settings.quiet)

    run(settings, work)


@click.command("ls")
@click.argument("bucket", required=False)
@click.argument("filters", nargs=-1)
@click.option(
    "--names", "-n", is_flag=True, hidden=True, expose_value=False
)  # natscli's: all ls prints
@verb
def ls(settings: Settings, bucket: str | None, filters: tuple[str, ...]) -> None:
    """List buckets (names; with --json, each bucket's info), or as natscli does the keys of
    BUCKET, optionally matching FILTERS (as `kv keys`)."""
    if bucket is not None:
        list_keys(settings, bucket, filters)
        return

    async def work(js: jetstream.JetStream) -> None:
        names = sorted([name async for name in kvstore.list_buckets(js)])
        if not settings.json:
            for name in names:
                click.echo(shown(name))
            return
        statuses = []
        for name in names:
            try:
                opened = await kvstore.open_bucket(js, name)
                statuses.append(bucket_fields(await opened.status()))
            except kvstore.BucketNotFoundError as exc:  # deleted meanwhile, or no KV bucket
                _log.warning("skipped %r: %s", name, exc)
        emit_json(statuses)

    run(settings, work)


@click.command("rm")
@click.argument("bucket")
@unlisted_arguments("keys")
@click.option("--force", "-f", is_flag=True, help="Do not ask.")
@verb
def rm(settings: Settings, bucket: str, keys: tuple[str, ...], force: bool) -> None:
    """Delete a bucket and all its keys."""
    if keys:  # natscli's `kv rm BUCKET KEY` deletes the key: ours deletes whole buckets
        raise click.UsageError(
            "`jetstore kv rm` deletes a whole bucket: to delete a key use "
            "`jetstore kv del BUCKET KEY`"
        )
    confirm(force, f"delete bucket {bucket!r} and all its keys?")

    async def work(js: jetstream.JetStream) -> None:
        await kvstore.delete_bucket(js, bucket)
        note(f"deleted bucket {bucket}", json=settings.json, quiet=settings.quiet)

    run(settings, work)


@click.command("compact")
@click.argument("bucket")
@click.option(
    "--older-than",
    callback=duration_option,
    default="30m",
    show_default=True,
    help="Keys deleted longer ago go whole; newer tombstones stay, their history goes.",
)
@click.option("--force", "-f", is_flag=True, help="Do not ask.")
@verb
def compact(settings: Settings, bucket: str, older_than: timedelta, force: bool) -> None:
    """Reclaim the space of deleted keys (natscli's `kv compact`); prints how many keys were
    removed whole."""
    confirm(force, f"remove the history of deleted keys in bucket {bucket!r}?")

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        removed = await opened.purge_deletes(older_than=older_than)
        if settings.json:
            emit_json({"removed": removed})
        elif not settings.quiet:
            click.echo(f"deleted keys removed whole: {removed}")

    run(settings, work)


_VERBS = (add, info, ls, rm, compact, put, create, update, delete, purge, put_many)
for _command in (*_VERBS, get, get_many, history, keys, watch, lock):
    kv.add_command(_command)
