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
    config = jetstream.StreamConfig(
        name=name, subjects=[f"{name}.{subjects}"], num_replicas=replicas, allow_direct=direct
    )
    if partitions:
        config.subject_transform = {
            "src": f"{name}.*",
            "dest": f"{{{{partition({partitions},1)}}}}.{name}.{{{{wildcard(1)}}}}",
        }
    await js.add_stream(config)
    yield name
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
