"""Deliveries routed past nats-py's message pipeline (``jetstream._transport.delivery``) reach
the user exactly as nats-py's path delivers them: same subjects, payloads and header dicts, whatever
headers other clients wrote (repeated names, bad UTF-8, odd spacing), in messages and in bytes
mode."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import nats
import pytest

import jetstream
from jetstream import ConsumerConfig, JetStream, StreamConfig
from jetstream._transport.delivery import route_of
from tests.raw_nats import raw_publish

pytestmark = pytest.mark.integration

HEADER_BLOCKS = [
    b"NATS/1.0\r\nA: 1\r\nA: 2\r\n\r\n",
    b"NATS/1.0\r\nName:NoSpace\r\nTabbed:\tvalue \r\n\r\n",
    b"NATS/1.0\r\nBad Name: skipped\r\nGood: kept\r\n\r\n",
    b"NATS/1.0\r\nValue: caf\xc3\xa9 \xff\r\n\r\n",
    b"NATS/1.0\r\nKV-Operation: DEL\r\nX-Empty: \r\n\r\n",
    b"NATS/1.0\r\n\r\n",
]


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


async def test_batched_direct_gets_read_routed_equal_nats_py(
    js: JetStream, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """``get_last_messages`` (every ``get_many``) reads its answers past nats-py's pipeline:
    the same messages, headers, errors and "nothing matched" as nats-py's path gives."""
    name = unique_name("D")
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_direct=True))
    try:
        frames = [(f"{name}.k{i}", block, b"v%d" % i) for i, block in enumerate(HEADER_BLOCKS)]
        frames += [(f"{name}.many.{i}", b"NATS/1.0\r\n\r\n", b"") for i in range(1030)]
        await raw_publish(nats_server.url, frames)
        nc = await nats.connect(nats_server.url)
        try:
            plain = JetStream(nc)
            assert route_of(plain.nc) is None and route_of(js.nc) is not None

            async def outcomes(ctx: JetStream) -> list[Any]:
                found = await ctx.get_last_messages(name, [f"{name}.k*"])
                absent = await ctx.get_last_messages(name, [f"{name}.none"])
                with pytest.raises(jetstream.ServerError) as too_many:
                    await ctx.get_last_messages(name, [f"{name}.many.*"])
                return [found, absent, (type(too_many.value), too_many.value.code)]

            expected = await outcomes(plain)
            through_nats_py = []
            process_msg = js.nc._process_msg

            async def counted(*args: Any, **kwargs: Any) -> None:
                through_nats_py.append(args)
                await process_msg(*args, **kwargs)

            js.nc._process_msg = counted  # type: ignore[method-assign]
            try:
                assert await outcomes(js) == expected
            finally:
                del js.nc._process_msg
            assert through_nats_py == []  # every answer took the route
            messages, as_of = expected[0]
            assert as_of == len(frames)
            assert [m.headers for m in messages[:2]] == [
                {"A": "2"},
                {"Name": "NoSpace", "Tabbed": "value"},
            ]
            assert expected[1] == ([], None) and expected[2][1] == 413
        finally:
            await nc.close()
    finally:
        await js.delete_stream(name)
