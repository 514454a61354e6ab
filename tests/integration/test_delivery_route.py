"""Deliveries routed past nats-py's message pipeline (``jetstream._delivery``) reach the user
exactly as nats-py's path delivers them: same subjects, payloads and header dicts, whatever
headers other clients wrote (repeated names, bad UTF-8, odd spacing), in messages and in bytes
mode."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import nats
import pytest

import jetstream
from jetstream import ConsumerConfig, JetStream, StreamConfig
from jetstream._delivery import route_of

pytestmark = pytest.mark.integration

HEADER_BLOCKS = [
    b"NATS/1.0\r\nA: 1\r\nA: 2\r\n\r\n",
    b"NATS/1.0\r\nName:NoSpace\r\nTabbed:\tvalue \r\n\r\n",
    b"NATS/1.0\r\nBad Name: skipped\r\nGood: kept\r\n\r\n",
    b"NATS/1.0\r\nValue: caf\xc3\xa9 \xff\r\n\r\n",
    b"NATS/1.0\r\nKV-Operation: DEL\r\nX-Empty: \r\n\r\n",
    b"NATS/1.0\r\n\r\n",
]


async def raw_publish(url: str, frames: list[tuple[str, bytes, bytes]]) -> None:
    """Publish ``(subject, header block, payload)`` as raw HPUB frames, as any client may."""
    host, port = url.removeprefix("nats://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        await reader.readline()  # INFO
        connect = {"verbose": False, "pedantic": False, "headers": True, "protocol": 1}
        writer.write(b"CONNECT " + json.dumps(connect).encode() + b"\r\n")
        for subject, block, payload in frames:
            total = len(block) + len(payload)
            writer.write(b"HPUB %s %d %d\r\n" % (subject.encode(), len(block), total))
            writer.write(block + payload + b"\r\n")
        writer.write(b"PING\r\n")
        await writer.drain()
        while (line := await reader.readline()) and line != b"PONG\r\n":
            assert not line.startswith(b"-ERR"), line
    finally:
        writer.close()
        await writer.wait_closed()


@pytest.fixture
async def stream(js: JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    name = unique_name("R")
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    yield name
    await js.delete_stream(name)


async def consumed(js: JetStream, stream: str, count: int, **options: Any) -> list[Any]:
    consumer = await js.create_consumer(stream, ConsumerConfig(ack_policy="none"))
    out = []
    async with consumer.consume(**options) as messages:
        async for message in messages:
            out.append((message.subject, message.data, message.headers, message.metadata))
            if len(out) == count:
                break
    return [(s, d, h, (m.stream_seq, m.pending)) for s, d, h, m in out]


async def test_routed_deliveries_equal_nats_py_deliveries(
    js: JetStream, nats_server: jetstream.EmbeddedServer, stream: str
) -> None:
    assert route_of(js.nc) is not None  # jetstream.connect's client routes
    frames = [(f"{stream}.k{i}", block, b"v%d" % i) for i, block in enumerate(HEADER_BLOCKS)]
    await raw_publish(nats_server.url, frames)
    assert (await js.stream_info(stream)).state.messages == len(frames)
    nc = await nats.connect(nats_server.url)
    try:
        plain = JetStream(nc)
        assert route_of(plain.nc) is None
        expected = await asyncio.wait_for(consumed(plain, stream, len(frames)), 10)
        assert await asyncio.wait_for(consumed(js, stream, len(frames)), 10) == expected
        routed = consumed(js, stream, len(frames), max_bytes=4096)
        assert await asyncio.wait_for(routed, 10) == expected
        assert [h for _, _, h, _ in expected][:2] == [
            {"A": "2"},
            {"Name": "NoSpace", "Tabbed": "value"},
        ]
    finally:
        await nc.close()
