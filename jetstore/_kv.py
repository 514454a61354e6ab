"""``jetstore kv``: KV buckets (verbs named as natscli's ``nats kv``). The bucket verbs live
here; the key verbs in :mod:`jetstore._kv_write` and :mod:`jetstore._kv_read`."""

from __future__ import annotations

import logging
from typing import Any

import click

import jetstream
import kvstore

from ._confirm import confirm
from ._connect import Settings, run, verb
from ._fields import bucket_fields
from ._kv_read import get, get_many, history, keys, watch
from ._kv_write import create, delete, purge, put, put_many, update
from ._output import emit_json, note, show_fields
from ._shown import shown
from ._values import duration_option, pairs, size_option

__all__ = ["kv"]

_log = logging.getLogger("jetstore")


@click.group()
def kv() -> None:
    """KV buckets: add, info, ls, rm; put, create, update, get, del, purge; history, keys,
    watch; put-many, get-many."""


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
        show_fields(bucket_fields(await created.status()), json=settings.json, quiet=settings.quiet)

    run(settings, work)


@click.command("info")
@click.argument("bucket")
@verb
def info(settings: Settings, bucket: str) -> None:
    """Show a bucket's configuration and size."""

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        show_fields(bucket_fields(await opened.status()), json=settings.json, quiet=settings.quiet)

    run(settings, work)


@click.command("ls")
@verb
def ls(settings: Settings) -> None:
    """List buckets (names; with --json, each bucket's info)."""

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
@click.option("--force", "-f", is_flag=True, help="Do not ask.")
@verb
def rm(settings: Settings, bucket: str, force: bool) -> None:
    """Delete a bucket and all its keys."""
    confirm(force, f"delete bucket {bucket!r} and all its keys?")

    async def work(js: jetstream.JetStream) -> None:
        await kvstore.delete_bucket(js, bucket)
        note(f"deleted bucket {bucket}", json=settings.json, quiet=settings.quiet)

    run(settings, work)


_VERBS = (add, info, ls, rm, put, create, update, delete, purge, put_many)
for _command in (*_VERBS, get, get_many, history, keys, watch):
    kv.add_command(_command)
