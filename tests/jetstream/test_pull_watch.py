"""The consume watch (heartbeats, reconnects, close) is driven by connection events, not by
polling: an idle consume wakes a handful of times, yet a reconnect or a close is acted on at
once. A context around an existing client (``JetStream(nc)``) hears no events and polls."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import nats
import pytest

import jetstream
from jetstream import ConsumerConfig, JetStream, StreamConfig
from tests.proxy import TcpProxy

pytestmark = pytest.mark.integration
EXPLICIT: dict[str, Any] = {"ack_policy": "explicit"}


@pytest.fixture(autouse=True)
def _collect() -> Iterator[None]:
    """A socket left open shows as a ResourceWarning (an error) in the test that leaked it."""
    yield
    gc.collect()


@pytest.fixture
async def stream(js: JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    name = unique_name("W")
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    yield name
    await js.delete_stream(name)


async def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def test_an_idle_consume_does_not_poll(js: JetStream, stream: str) -> None:
    consumer = await js.create_consumer(stream, ConsumerConfig(durable_name="idle", **EXPLICIT))
    async with consumer.consume(heartbeat=5, expires=30) as messages:
        puller = messages._puller
        before = puller.wakeups
        await asyncio.sleep(2.0)  # the observation window, not a synchronisation
        woke = puller.wakeups - before
    # Polling woke every 0.1 s: ~20 times in 2 s. Now only the heartbeat deadline (10 s away).
    assert woke <= 3, f"the watch woke {woke} times in 2 s of idle consume"


async def _reconnected_consume_delivers(
    context: JetStream, admin: JetStream, stream: str, proxy: TcpProxy
) -> float:
    """Seconds from the reconnect to the delivery of a message published after it, for a
    consume with a 5 s heartbeat (missed heartbeats would only re-pull after 10 s)."""
    consumer = await context.create_consumer(stream, ConsumerConfig(durable_name="rc", **EXPLICIT))
    async with consumer.consume(heartbeat=5, expires=30) as messages:
        await admin.publish(f"{stream}.a", b"before")
        assert (await asyncio.wait_for(messages.__anext__(), 5)).data == b"before"
        reconnects = context.nc.stats["reconnects"]
        proxy.cut()
        await _until(
            lambda: context.nc.stats["reconnects"] > reconnects and context.nc.is_connected
        )
        reconnected = time.monotonic()
        await admin.publish(f"{stream}.a", b"after")
        message = await asyncio.wait_for(messages.__anext__(), 8)
        assert message.data == b"after"
        return time.monotonic() - reconnected


async def test_a_reconnect_is_acted_on_at_once(
    js: JetStream, stream: str, nats_server: jetstream.EmbeddedServer
) -> None:
    proxy = await TcpProxy(nats_server.port).start()
    try:
        async with await jetstream.connect(
            proxy.url, reconnect_time_wait=0.05, max_reconnect_attempts=-1
        ) as cut_js:
            assert await _reconnected_consume_delivers(cut_js, js, stream, proxy) < 2.0
    finally:
        await proxy.close()


async def test_a_context_around_an_existing_client_still_notices_reconnects(
    js: JetStream, stream: str, nats_server: jetstream.EmbeddedServer
) -> None:
    # Its callbacks belong to the caller: the watch polls (the fallback) and still re-pulls.
    proxy = await TcpProxy(nats_server.port).start()
    nc = await nats.connect(proxy.url, reconnect_time_wait=0.05, max_reconnect_attempts=-1)
    try:
        wrapped = JetStream(nc)
        assert not wrapped.connection_events.wired
        assert await _reconnected_consume_delivers(wrapped, js, stream, proxy) < 2.0
    finally:
        await nc.close()
        await proxy.close()


@pytest.mark.parametrize("close", ["connection", "context"])
async def test_closing_ends_an_idle_consume_at_once(
    nats_server: jetstream.EmbeddedServer, js: JetStream, stream: str, close: str
) -> None:
    await js.create_consumer(stream, ConsumerConfig(durable_name="cl", **EXPLICIT))
    async with await jetstream.connect(nats_server.url) as other:
        consumer = await other.consumer(stream, "cl")
        async with consumer.consume(heartbeat=5, expires=30) as messages:
            started = time.monotonic()
            await (other.nc.close() if close == "connection" else other.close())
            with pytest.raises(jetstream.ConnectionClosedError):
                await asyncio.wait_for(messages.__anext__(), 5)
            assert time.monotonic() - started < 1.0


async def test_the_users_connection_callbacks_are_still_called(
    nats_server: jetstream.EmbeddedServer,
) -> None:
    proxy = await TcpProxy(nats_server.port).start()
    seen: list[str] = []

    def recorder(name: str) -> Callable[[], Any]:
        async def callback() -> None:
            seen.append(name)

        return callback

    try:
        cut_js = await jetstream.connect(
            proxy.url,
            reconnect_time_wait=0.05,
            max_reconnect_attempts=-1,
            disconnected_cb=recorder("disconnected"),
            reconnected_cb=recorder("reconnected"),
            closed_cb=recorder("closed"),
        )
        async with cut_js:
            proxy.cut()
            await _until(lambda: "reconnected" in seen)
        assert seen[:2] == ["disconnected", "reconnected"] and seen[-1] == "closed"
    finally:
        await proxy.close()


async def test_a_connection_callback_that_is_not_async_is_refused(
    nats_server: jetstream.EmbeddedServer,
) -> None:
    with pytest.raises(jetstream.ClientValidationError, match="reconnected_cb"):
        await jetstream.connect(nats_server.url, reconnected_cb=lambda: None)
