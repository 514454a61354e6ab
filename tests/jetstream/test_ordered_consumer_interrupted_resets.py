"""An ordered consumer's reset interrupted at any point (the read stopped from another task, or
cancelled, while it recreates the consumer against a server that stopped answering or deleted
it) leaves one consumer or none on the server, and the next reads lose nothing."""

from __future__ import annotations

import asyncio
import contextlib
import os

import pytest

import jetstream
import kvstore
from jetstream import OrderedConsumer, StreamConfig

pytestmark = pytest.mark.integration


async def _waiting_consumers(js: jetstream.JetStream, stream: str) -> list[str]:
    """Consumers of ``stream`` that someone is pulling from."""
    busy = []
    async for name in js.consumer_names(stream):
        try:
            info = await js.consumer_info(stream, name)
        except jetstream.ConsumerNotFoundError:
            continue
        if info.num_waiting:
            busy.append(name)
    return busy


async def _consumer_count(js: jetstream.JetStream, stream: str) -> int:
    return len([name async for name in js.consumer_names(stream)])


async def test_close_during_a_reset_stops_the_consumer_for_good() -> None:
    """A watch stopped (from another task) while its read is recreating the consumer against
    a silent server: once the server is back, the read must not build a new consumer and go
    on delivering (nor leave a consumer that is pulled forever)."""
    async with (
        jetstream.EmbeddedServer() as server,
        await jetstream.connect(server.url, timeout=0.5, retry_deadline=1.0) as js,
    ):
        bucket = await kvstore.create_bucket(js, "closing")
        await bucket.put("a", b"1")
        consumer = OrderedConsumer(js, bucket.stream, heartbeat=0.5)
        assert (await anext(consumer)).data == b"1"
        reader = asyncio.ensure_future(anext(consumer))
        server.pause()
        try:
            await asyncio.sleep(3)  # heartbeats missed: the reader is in _reset, failing
            assert consumer.resets >= 1
            closer = asyncio.ensure_future(consumer.close())
            await asyncio.sleep(0.2)
        finally:
            server.resume()
        async with asyncio.timeout(15):
            await closer
        await asyncio.sleep(3)  # the reader's next create attempt has happened by now
        await bucket.put("a", b"2")
        await asyncio.sleep(1)
        delivered_after_close = (
            reader.done() and not reader.cancelled() and (reader.exception() is None)
        )
        pulled = await _waiting_consumers(js, bucket.stream)
        if not reader.done():
            reader.cancel()
        assert not delivered_after_close, f"a closed consumer delivered; still pulled: {pulled}"
        assert pulled == []


async def test_reads_cancelled_at_any_point_of_a_reset_lose_nothing_and_leak_nothing(
    js: jetstream.JetStream,
) -> None:
    """The consumer is deleted on the server (a reset follows) and the read is cancelled
    after 0-60 ms, at whatever await the reset is in: the next reads go on in order, with one
    consumer on the server and no subscription of a stopped puller left on the connection."""
    name = f"CX{os.getpid()}"
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    try:
        await js.publish(f"{name}.x", b"0")
        nc = js.nc
        async with OrderedConsumer(js, name, heartbeat=1.0) as consumer:
            assert (await anext(consumer)).data == b"0"
            baseline = len(nc._subs)
            got: list[bytes] = []
            for step in range(31):
                await js.delete_consumer(name, consumer._name)
                reader = asyncio.ensure_future(anext(consumer))
                await asyncio.sleep(step * 0.002)
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    got.append((await reader).data)
                await js.publish(f"{name}.x", str(step + 1).encode())
                async with asyncio.timeout(20):
                    while not got or got[-1] != str(step + 1).encode():
                        got.append((await anext(consumer)).data)
                await asyncio.sleep(0.3)  # the deletes of replaced consumers
                assert got == [str(i).encode() for i in range(1, step + 2)], got
                assert len(nc._subs) == baseline, f"step {step}: {len(nc._subs)} subscriptions"
                count = await _consumer_count(js, name)
                assert count == 1, f"step {step}: {count} consumers"
    finally:
        await js.delete_stream(name)
