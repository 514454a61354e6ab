"""What the driver and the tasks ask the server about a bucket: a task's connection (a bucket
deleted after planning is BucketNotFoundError naming it) and the bucket's stream sequences."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from jetstream import JetStream, Keyring
from jetstream._publish.atomic import DEFAULT_COMMIT_DEADLINE

from .._bucket import Bucket
from .._errors import missing_bucket
from .._manage import bucket_info, open_bucket
from ._options import Options

__all__ = [
    "Offset",
    "commit_deadline",
    "first_seq",
    "last_seq",
    "stream_end",
    "task_session",
    "writable_bucket",
]

Offset = dict[str, int | str]
"""A stream offset as Spark checkpoints it (JSON)."""


@contextlib.asynccontextmanager
async def task_session(opts: Options) -> AsyncIterator[JetStream]:
    """A task's connection. A bucket deleted after planning is BucketNotFoundError naming it,
    as at planning, whatever the task's reads got ("stream not found", or "no responders"
    for a batched direct get)."""
    async with opts.connection.session() as js, missing_bucket(js, opts.bucket):
        yield js


async def last_seq(opts: Options) -> int:
    """The bucket's last revision (BucketNotFoundError, naming it, when it does not exist)."""
    return int((await stream_end(opts))["seq"])


async def stream_end(opts: Options) -> Offset:
    """The offset of the bucket's last revision, with the stream's creation time: a bucket
    deleted and created again starts its revisions over, and an offset of the old one must
    not be read as a point in the new one (BucketNotFoundError when it does not exist)."""
    async with opts.connection.session() as js:
        info = await bucket_info(js, opts.bucket)
    created = info.created.isoformat() if info.created is not None else ""
    return {"seq": info.state.last_seq, "created": created}


async def first_seq(opts: Options) -> int:
    """The sequence of the bucket's oldest message still stored."""
    async with opts.connection.session() as js:
        return (await bucket_info(js, opts.bucket)).state.first_seq


async def writable_bucket(js: JetStream, opts: Options) -> Bucket:
    """The bucket a task writes, encrypting with the key file's keys where the task runs, its
    keys through the ``keyCodec``.

    Raises:
        BucketNotFoundError: no such bucket; InvalidKeyringError: a bad key file.
    """
    return await open_bucket(
        js,
        opts.bucket,
        encryption=None if opts.key_file is None else Keyring.from_file(opts.key_file),
        allow_plaintext=opts.allow_plaintext,
        key_codec=opts.key_codec,
    )


def commit_deadline(opts: Options) -> float:
    """Seconds a write resolves an atomic batch's unanswered commit: ``retryDeadline`` when
    given (it bounds commits too), else the library's."""
    chosen = opts.connection.retry_deadline
    return DEFAULT_COMMIT_DEADLINE if chosen is None else chosen
