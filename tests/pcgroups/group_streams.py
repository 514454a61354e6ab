"""Streams for consumer-group tests, and the cleanup every such test needs."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import jetstream
import pcgroups


@contextlib.asynccontextmanager
async def group_stream(
    js: jetstream.JetStream,
    name: str,
    *,
    partitions: int = 0,
    subjects: str = "*",
    replicas: int = 1,
    direct: bool = False,
) -> AsyncIterator[str]:
    """A stream on ``<name>.<subjects>`` (``direct``: with direct get). With ``partitions``,
    a message ``<name>.<key>`` is stored as ``<p>.<name>.<key>`` (orbit's static setup).
    Afterwards every static and elastic group on it, their work-queue streams and the stream
    itself are removed."""
    await add_group_stream(
        js, name, partitions=partitions, subjects=subjects, replicas=replicas, direct=direct
    )
    yield name
    await remove_group_stream(js, name)


async def add_group_stream(
    js: jetstream.JetStream,
    name: str,
    *,
    partitions: int = 0,
    subjects: str = "*",
    replicas: int = 1,
    direct: bool = False,
) -> None:
    """The stream of :func:`group_stream`, for a test that cannot hold it open in a loop."""
    config = jetstream.StreamConfig(
        name=name, subjects=[f"{name}.{subjects}"], num_replicas=replicas, allow_direct=direct
    )
    if partitions:
        config.subject_transform = {
            "src": f"{name}.*",
            "dest": f"{{{{partition({partitions},1)}}}}.{name}.{{{{wildcard(1)}}}}",
        }
    await js.add_stream(config)


async def remove_group_stream(js: jetstream.JetStream, name: str) -> None:
    """Remove every group on the stream, their work-queue streams and the stream."""
    async for group in pcgroups.list_static(js, name):
        with contextlib.suppress(jetstream.JetStreamError):
            await pcgroups.delete_static(js, name, group)
    async for group in pcgroups.list_elastic(js, name):
        with contextlib.suppress(jetstream.JetStreamError):
            await pcgroups.delete_elastic(js, name, group)
    async for stream in js.stream_names():
        if stream.startswith(f"{name}-"):
            await js.delete_stream(stream)
    await js.delete_stream(name)


@contextlib.asynccontextmanager
async def one_member_group(js: jetstream.JetStream, name: str, kind: str) -> AsyncIterator[str]:
    """A stream (as :func:`group_stream`) with a ``kind`` ("static" or "elastic") group ``g``
    whose one member ``m1`` owns every partition (an elastic one partitions by the key)."""
    async with group_stream(js, name, partitions=1 if kind == "static" else 0) as stream:
        if kind == "static":
            await pcgroups.create_static(js, stream, "g", max_members=1, members=["m1"])
        else:
            by_key = pcgroups.PartitioningFilter(f"{stream}.*", (1,))
            await pcgroups.create_elastic(js, stream, "g", max_members=1, filters=[by_key])
            await pcgroups.add_members(js, stream, "g", ["m1"])
        yield stream
