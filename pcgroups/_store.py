"""The KV buckets holding group configs: opened (or created the way orbit.go creates them)
and read with typed errors."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from jetstream import JetStream
from kvstore import (
    Bucket,
    BucketExistsError,
    BucketNotFoundError,
    KeyNotFoundError,
    create_bucket,
    open_bucket,
)

from ._assign import validate_group_names, validate_key_token
from ._errors import GroupNotFoundError, InvalidGroupNameError

__all__ = ["ensure_bucket", "existing_bucket", "group_names", "read_config"]

_log = logging.getLogger("pcgroups")


async def existing_bucket(js: JetStream, name: str) -> Bucket | None:
    """The config bucket, or None when nobody has created a group of this kind yet."""
    try:
        return await open_bucket(js, name)
    except BucketNotFoundError:
        return None


async def ensure_bucket(js: JetStream, name: str, *, replicas: int) -> Bucket:
    """The config bucket, created if missing like orbit.go does (file storage, history 1, the
    group's stream's replica count; other settings are the NATS KV defaults)."""
    bucket = await existing_bucket(js, name)
    if bucket is not None:
        return bucket
    try:
        return await create_bucket(js, name, replicas=replicas, storage="file")
    except BucketExistsError:
        return await open_bucket(js, name)  # created meanwhile, by another client


async def read_config(
    bucket: Bucket | None, stream: str, group: str, kind: str
) -> tuple[bytes, int]:
    """The stored config JSON of ``<stream>.<group>`` and its revision.

    Raises:
        GroupNotFoundError: no bucket, or no live value for the key.
    """
    if bucket is None:
        raise GroupNotFoundError(stream, group, kind)
    try:
        entry = await bucket.get(f"{stream}.{group}")
    except KeyNotFoundError as exc:
        raise GroupNotFoundError(stream, group, kind) from exc
    return entry.value, entry.revision


async def group_names(js: JetStream, bucket_name: str, stream: str) -> AsyncIterator[str]:
    """The names of the groups on ``stream`` in the config bucket ``bucket_name``, sorted
    (none when the bucket does not exist yet). A key whose group name no call accepts
    (another client may write any key) is skipped with a warning in the log.

    Raises:
        InvalidGroupNameError: bad stream name; nothing is sent.
    """
    validate_key_token(stream, "stream")
    bucket = await existing_bucket(js, bucket_name)
    if bucket is None:
        return
    names = []
    async for key in bucket.keys(f"{stream}.*"):
        group = key.split(".", 1)[1]
        try:
            validate_group_names(stream, group)
        except InvalidGroupNameError:
            _log.warning("bucket %r: skipped key %r: not a valid group name", bucket_name, key)
        else:
            names.append(group)
    for name in sorted(names):
        yield name
