"""Pull consumers on a real server: management, fetch/next, consume, terminal statuses,
heartbeats, connection cuts, and ordered consumers that recover."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

import jetstream
from jetstream import ConsumerConfig, JetStream, StreamConfig
from tests.proxy import TcpProxy

EXPLICIT = {"ack_policy": "explicit"}


@pytest.fixture
async def stream(js: JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    name = unique_name("C")
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    yield name
    await js.delete_stream(name)


async def _publish(js: JetStream, stream: str, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        await js.nc.publish(f"{stream}.{i % 5}", str(i).encode())
    await js.nc.flush()
    while (await js.stream_info(stream)).state.last_seq < start + count:
        await asyncio.sleep(0.01)


async def test_consumer_management(js: JetStream, stream: str) -> None:
    created = await js.create_consumer(stream, ConsumerConfig(durable_name="d", **EXPLICIT))
    assert created.name == "d" and created.cached_info.config is not None
    assert created.cached_info.config.ack_policy == "explicit"
    same = await js.create_consumer(stream, ConsumerConfig(durable_name="d", **EXPLICIT))
    assert same.name == "d", "creating the same consumer again is fine"
    with pytest.raises(jetstream.ConsumerExistsError):
        await js.create_consumer(stream, ConsumerConfig(durable_name="d", ack_policy="none"))
    updated = await js.update_consumer(
        stream, ConsumerConfig(durable_name="d", description="x", **EXPLICIT)
    )
    assert updated.cached_info.config.description == "x"  # type: ignore[union-attr]
    with pytest.raises(jetstream.ConsumerNotFoundError):
        await js.update_consumer(stream, ConsumerConfig(durable_name="nope", **EXPLICIT))
    await js.create_or_update_consumer(stream, ConsumerConfig(durable_name="e", **EXPLICIT))
    filtered = await js.create_consumer(
        stream, ConsumerConfig(name="f", filter_subject=f"{stream}.1", **EXPLICIT)
    )
    assert filtered.cached_info.config.filter_subject == f"{stream}.1"  # type: ignore[union-attr]
    ephemeral = await js.create_consumer(stream, ConsumerConfig(inactive_threshold=10))
    assert ephemeral.name
    assert sorted([n async for n in js.consumer_names(stream)]) == sorted(
        ["d", "e", "f", ephemeral.name]
    )
    assert (await js.consumer(stream, "e")).name == "e"
    await js.delete_consumer(stream, "e")
    with pytest.raises(jetstream.ConsumerNotFoundError):
        await js.consumer_info(stream, "e")
    with pytest.raises(jetstream.ConsumerNotFoundError):
        await js.delete_consumer(stream, "e")


async def test_fetch_and_next(js: JetStream, stream: str) -> None:
    await _publish(js, stream, 20)
    consumer = await js.create_consumer(stream, ConsumerConfig(durable_name="f", **EXPLICIT))
    batch = [m async for m in consumer.fetch(7, expires=2)]
    assert [m.data for m in batch] == [str(i).encode() for i in range(7)]
    for message in batch:
        await message.ack()
    one = await consumer.next(timeout=2)
    assert one.data == b"7" and one.metadata.stream_seq == 8
    await one.ack()
    by_bytes = [m async for m in consumer.fetch(max_bytes=200, expires=2)]
    assert 1 <= len(by_bytes) < 12, "max_bytes bounds the pull"
    for message in by_bytes:
        await message.ack()
    rest = [m async for m in consumer.fetch(100, expires=1, heartbeat=0.5)]
    assert len(batch) + 1 + len(by_bytes) + len(rest) == 20, "an expiring pull ends the fetch"
    with pytest.raises(jetstream.RequestTimeoutError):
        await consumer.next(timeout=1)
    with pytest.raises(jetstream.ClientValidationError):
        [m async for m in consumer.fetch(1, max_bytes=10)]


@pytest.mark.parametrize("limits", [{"max_messages": 1}, {"max_messages": 50}, {"max_bytes": 512}])
async def test_consume_delivers_everything_in_order(
    js: JetStream, stream: str, limits: dict[str, int]
) -> None:
    await _publish(js, stream, 300)
    consumer = await js.create_consumer(stream, ConsumerConfig(durable_name="c", **EXPLICIT))
    seen: list[int] = []
    async with consumer.consume(**limits, expires=2) as messages:
        async for message in messages:
            seen.append(int(message.data))
            await message.ack()
            if len(seen) == 300:
                break
    assert seen == list(range(300))


async def test_consume_with_a_callback_then_drain(js: JetStream, stream: str) -> None:
    await _publish(js, stream, 100)
    consumer = await js.create_consumer(stream, ConsumerConfig(durable_name="cb", **EXPLICIT))
    seen: list[bytes] = []
    everything = asyncio.Event()

    async def handle(message: jetstream.PullMessage) -> None:
        seen.append(message.data)
        await message.ack()
        if len(seen) == 100:
            everything.set()

    handle_stream = await consumer.consume(handle, max_messages=10, expires=2)
    await asyncio.wait_for(everything.wait(), 10)
    await asyncio.wait_for(handle_stream.drain(), 10)
    assert len(seen) == 100 and len(set(seen)) == 100


async def test_kept_buffered_messages_do_not_time_out_while_they_wait(
    js: JetStream, stream: str
) -> None:
    """A callback of 60% of ``ack_wait`` behind which four messages wait: with
    ``keep_buffered`` each is delivered once (before, the later ones timed out in the buffer
    and came again), and none times out under its callback either."""
    await _publish(js, stream, 5)
    config = ConsumerConfig(durable_name="kb", ack_wait=2.0, max_ack_pending=10, **EXPLICIT)  # type: ignore[arg-type]
    consumer = await js.create_consumer(stream, config)
    seen: list[tuple[int, int]] = []  # (n, delivered)
    everything = asyncio.Event()

    async def handle(message: jetstream.PullMessage) -> None:
        await asyncio.sleep(1.2)
        seen.append((int(message.data), message.metadata.delivered))
        await message.ack()
        if len(seen) == 5:
            everything.set()

    async with consumer.consume(handle, keep_buffered=True):
        await asyncio.wait_for(everything.wait(), 15)
    info = await js.consumer_info(stream, "kb")
    assert seen == [(n, 1) for n in range(5)]
    assert info.delivered.consumer_seq == 5  # no delivery but the first of each


async def test_a_deleted_consumer_ends_consume_with_a_typed_error(
    js: JetStream, stream: str
) -> None:
    await _publish(js, stream, 3)
    consumer = await js.create_consumer(stream, ConsumerConfig(durable_name="gone", **EXPLICIT))
    async with consumer.consume(max_messages=10, expires=5) as messages:
        received = 0
        with pytest.raises(jetstream.ConsumerDeletedError):
            async for message in messages:
                await message.ack()
                received += 1
                if received == 3:
                    await js.delete_consumer(stream, "gone")
    assert received == 3 and isinstance(messages.error, jetstream.ConsumerDeletedError)


async def test_an_ordered_consumer_recovers_when_deleted_from_outside(
    js: JetStream, stream: str
) -> None:
    await _publish(js, stream, 50)
    seen: list[int] = []
    async with jetstream.OrderedConsumer(js, stream, max_messages=5, heartbeat=1) as ordered:
        async for message in ordered:
            seen.append(int(message.data))
            if len(seen) == 20:
                names = [n async for n in js.consumer_names(stream)]
                for name in names:
                    await js.delete_consumer(stream, name)
                await _publish(js, stream, 10, start=50)
            if len(seen) == 60:
                break
    assert seen == list(range(60)), "in order, nothing lost, nothing twice"
    assert ordered.resets >= 1, "recreated after the deletion"


async def test_missed_heartbeats_are_reported_while_the_server_is_paused(
    unique_name: Callable[[str], str],
) -> None:
    warnings: list[jetstream.JetStreamError] = []
    async with jetstream.EmbeddedServer() as server, await jetstream.connect(server.url) as js:
        name = unique_name("HB")
        await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
        consumer = await js.create_consumer(name, ConsumerConfig(durable_name="hb", **EXPLICIT))
        async with consumer.consume(
            expires=1.0, heartbeat=0.5, error_callback=warnings.append
        ) as messages:
            server.pause()
            await asyncio.sleep(2.0)
            server.resume()
            assert any(isinstance(w, jetstream.HeartbeatMissedError) for w in warnings)
            await js.publish(f"{name}.a", b"after")
            message = await asyncio.wait_for(messages.__anext__(), 10)
            assert message.data == b"after", "consume keeps going after the warning"


async def test_a_drain_the_frozen_server_answers_late_leaves_no_subscription_behind(
    unique_name: Callable[[str], str],
) -> None:
    async with (
        jetstream.EmbeddedServer() as server,
        await jetstream.connect(server.url, timeout=0.5) as js,
    ):
        name = unique_name("DR")
        await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
        consumer = await js.create_consumer(name, ConsumerConfig(durable_name="dr", **EXPLICIT))
        before = asyncio.all_tasks()
        try:
            async with consumer.consume(expires=1.0) as messages:
                server.pause()
                draining = asyncio.create_task(messages.drain())  # ends after the timeout
                async for _ in messages:
                    pass
                await draining
        finally:
            server.resume()
        left = [t for t in asyncio.all_tasks() - before if "_wait_for_msgs" in repr(t)]
        assert left == [], "the subscription of the pulls is still there"
        # the server answers the drain's round trip late: the connection still works
        await js.nc.flush()
        assert (await js.stream_info(name)).config.name == name


async def test_consume_survives_a_cut_connection(
    js: JetStream, stream: str, nats_server: jetstream.EmbeddedServer
) -> None:
    proxy = await TcpProxy(nats_server.port).start()
    try:
        async with await jetstream.connect(
            proxy.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1
        ) as cut_js:
            consumer = await cut_js.create_consumer(
                stream, ConsumerConfig(durable_name="cut", ack_wait=2, **EXPLICIT)
            )
            seen: set[int] = set()
            async with consumer.consume(max_messages=20, expires=2) as messages:
                await _publish(js, stream, 100)
                async for message in messages:
                    seen.add(int(message.data))
                    await message.ack()
                    if len(seen) == 30 and proxy._writers:
                        proxy.cut()
                        await _publish(js, stream, 100, start=100)
                    if len(seen) == 200:
                        break
            assert seen == set(range(200))
    finally:
        await proxy.close()


async def test_pulling_from_a_push_consumer_is_a_typed_error(js: JetStream, stream: str) -> None:
    push = await js.create_consumer(
        stream, ConsumerConfig(durable_name="push", deliver_subject="push.target")
    )
    with pytest.raises(jetstream.PullRequestError, match="push based"):
        [m async for m in push.fetch(1, expires=2)]
    async with push.consume(expires=2) as messages:
        with pytest.raises(jetstream.PullRequestError, match="push based"):
            await asyncio.wait_for(messages.__anext__(), 5)


async def test_bad_consumer_options_are_refused_before_sending(js: JetStream, stream: str) -> None:
    consumer = await js.create_consumer(stream, ConsumerConfig(durable_name="opts", **EXPLICIT))
    for options in ({"expires": 0}, {"expires": -1}, {"max_messages": 0}):
        with pytest.raises(jetstream.ClientValidationError):
            [m async for m in consumer.fetch(**options)]  # type: ignore[arg-type]
    for bad in (
        {"deliver_policy": "by_start_time"},
        {"deliver_policy": "x"},
        {"opt_start_seq": -1},
    ):
        with pytest.raises(jetstream.ClientValidationError):
            jetstream.OrderedConsumer(js, stream, **bad)  # type: ignore[arg-type]
    with pytest.raises(jetstream.ClientValidationError):
        consumer.consume(max_messages=10, max_bytes=100)
