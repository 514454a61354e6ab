"""``jetstore kv`` writes: put, create, update, del, purge, put-many. Keys and TTLs are
checked before connecting, a value read once the bucket is open and put-many's records once
connected (exit 2, nothing sent)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

import jetstream
import kvstore
from jetstream import TTLValue
from jetstream._publish.atomic import DEFAULT_MAX_BATCH

from ._connect import Settings, run, verb
from ._habits import unlisted_arguments
from ._input import refuse_closed_stdin
from ._kv_input import read_put_many_records, read_value, value_source
from ._output import EXIT_FAILED, emit_json, report_error
from ._records import Record, format_of
from ._values import checked

__all__ = ["create", "delete", "purge", "put", "put_many", "update"]


_value_arg = click.argument("value", required=False)
_file_opt = click.option(
    "--file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read the value from this file (else VALUE, or stdin).",
)
_ttl_opt = click.option("--ttl", help="Key TTL: seconds, 90s, 1h, 30d or never.")


# natscli asks before it deletes or purges a key, unless -f; jetstore never asks there.
_never_asks = click.option("--force", "-f", is_flag=True, hidden=True, expose_value=False)


def _wrote(settings: Settings, key: str, revision: int) -> None:
    if settings.json:
        emit_json({"key": key, "revision": revision})
    elif not settings.quiet:
        click.echo(revision)


@click.command("put")
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
    source = value_source(value, file)

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        data = await read_value(opened, source)
        _wrote(settings, key, await opened.put(key, data, ttl=ttl))

    run(settings, work)


@click.command("create")
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
    source = value_source(value, file)

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        data = await read_value(opened, source)
        _wrote(settings, key, await opened.create(key, data, ttl=ttl))

    run(settings, work)


@click.command("update")
@click.argument("bucket")
@click.argument("key")
@_value_arg
@unlisted_arguments("expected")
@_file_opt
@_ttl_opt
@click.option("--revision", type=click.IntRange(min=0), help="Expected current revision.")
@verb
def update(
    settings: Settings,
    bucket: str,
    key: str,
    value: str | None,
    expected: tuple[str, ...],
    file: Path | None,
    ttl: str | None,
    revision: int | None,
) -> None:
    """Compare-and-set: store only if KEY is at --revision (exit 1 naming the current one).
    natscli's `kv update BUCKET KEY VALUE REVISION` works too."""
    revision = _expected_revision(revision, expected)
    checked(key=key, ttl=ttl)
    source = value_source(value, file)

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        data = await read_value(opened, source)
        _wrote(settings, key, await opened.update(key, data, revision, ttl=ttl))

    run(settings, work)


def _expected_revision(option: int | None, positional: tuple[str, ...]) -> int:
    """``--revision N``, or natscli's revision after the value; exactly one of them.

    Raises:
        click.UsageError: neither, both, or more than one positional revision.
    """
    if not positional:
        if option is None:
            raise click.UsageError("give the expected revision: --revision N")
        return option
    if option is not None or len(positional) > 1:
        raise click.UsageError(
            "give the expected revision once: `jetstore kv update BUCKET KEY VALUE --revision N`"
        )
    text = positional[0]
    if not (text.isascii() and text.isdigit()):
        raise click.BadParameter(
            f"{text!r} is not a revision (a number >= 0)", param_hint="REVISION"
        )
    return int(text)


@click.command("del")
@click.argument("bucket")
@click.argument("key", required=False, metavar="KEY")
@click.option("--revision", type=click.IntRange(min=0), help="Only if KEY is at this revision.")
@_never_asks
@verb
def delete(settings: Settings, bucket: str, key: str | None, revision: int | None) -> None:
    """Delete KEY (a DEL tombstone; history kept); prints the tombstone's revision."""
    if key is None:  # natscli's `kv del BUCKET` deletes the bucket: ours names the key
        raise click.UsageError(
            "name the key; to delete the whole bucket use `jetstore kv rm BUCKET`"
        )
    checked(key=key)

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        _wrote(settings, key, await opened.delete(key, revision=revision))

    run(settings, work)


@click.command("purge")
@click.argument("bucket")
@click.argument("key")
@click.option("--ttl", help="Let the PURGE tombstone itself expire after this long.")
@click.option("--revision", type=click.IntRange(min=0), help="Only if KEY is at this revision.")
@_never_asks
@verb
def purge(settings: Settings, bucket: str, key: str, ttl: str | None, revision: int | None) -> None:
    """Purge KEY: a PURGE tombstone, earlier revisions removed."""
    checked(key=key, ttl=ttl)

    async def work(js: jetstream.JetStream) -> None:
        opened = await kvstore.open_bucket(js, bucket)
        _wrote(settings, key, await opened.purge(key, ttl=ttl, revision=revision))

    run(settings, work)


@click.command("put-many")
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
    default=DEFAULT_MAX_BATCH,
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
    input_format = format_of(input_file, fmt)
    checked(ttl=ttl)
    refuse_closed_stdin(input_file)

    async def work(js: jetstream.JetStream) -> int | None:
        records = await read_put_many_records(js, input_file, input_format)
        _check_records(records)
        opened = await kvstore.open_bucket(js, bucket)
        # Every batch is queued, so every value is checked against the bucket's and the
        # server's limits, before the first one is sent: exit 2 means nothing was written.
        batches = [
            _queued(opened, records[start : start + batch_size], ttl)
            for start in range(0, len(records), batch_size)
        ]
        stored: dict[str, int] = {}
        for batch in batches:
            try:
                stored.update(await batch.commit())
            except jetstream.JetStreamError as exc:
                if not stored:
                    raise
                click.echo(f"jetstore: {len(stored)} keys were stored before:", err=True)
                _report_revisions(settings, stored)
                # Part of the input is stored: a failure, never "nothing sent" (exit 2).
                return report_error(exc, debug=settings.debug, code=EXIT_FAILED)
            except asyncio.CancelledError:  # Ctrl-C or SIGTERM: say where to resume from
                click.echo(
                    f"jetstore: stopped; {len(stored)} keys were stored before, and the batch "
                    f"of {len(batch)} being committed may or may not be:",
                    err=True,
                )
                _report_revisions(settings, stored)
                raise
        _report_revisions(settings, stored)
        return None

    run(settings, work)


def _check_records(records: list[Record]) -> None:
    """Every key and TTL checked before the first batch is sent (exit 2, nothing stored)."""
    for record in records:
        checked(key=record.key, ttl=record.ttl)


def _queued(bucket: kvstore.Bucket, records: list[Record], ttl: str | None) -> kvstore.KeyBatch:
    """One batch of ``records``, checked (values against the limits) and queued, not sent."""
    ttls: dict[str, TTLValue] = {}
    for record in records:
        if (key_ttl := record.ttl or ttl) is not None:
            ttls[record.key] = key_ttl
    expect = {r.key: r.revision for r in records if r.revision is not None}
    return bucket.prepare_many(
        [(r.key, r.value) for r in records], expect=expect, ttl=ttls, max_keys=len(records)
    )


def _report_revisions(settings: Settings, stored: dict[str, int]) -> None:
    if settings.json:
        emit_json(stored)
    elif not settings.quiet:
        for key, revision in stored.items():
            click.echo(f"{key} {revision}")
