"""ADR-37 conformance of consume / fetch / next on a real server (issue 12): no pull storms
(pulls counted on the server's subject by a second connection), drains that end, a deleted
consumer under a backlog, consumer limits that are warnings, option validation, heartbeats on
long fetches, typed errors on a closed connection."""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

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
    name = unique_name("P")
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    yield name
    await js.delete_stream(name)


_PROBE = b"{not a pull request}"
"""Refused by the consumer (400 Bad Request: not JSON). A body that does not start with "{"
and is no number is taken as a pull of one message, which would be delivered to nobody."""


class Pulls:
    """Pull requests sent to one consumer, seen by a separate connection on the API subject."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    @classmethod
    async def watch(
        cls, admin: JetStream, js: JetStream, stream: str, consumer: str
    ) -> tuple[Pulls, Any]:
        """Start watching; returns once a probe sent by ``js`` was seen.

        The server sometimes does not hand the publisher's first message on this subject to a
        subscriber added just before it (flush() or not), so the test would miss the first
        real pull. A probe that is not a pull request ("400 Bad Request", nothing delivered)
        goes first, until one arrives.
        """
        pulls = cls()
        probes: list[bytes] = []

        async def seen(msg: Any) -> None:
            if msg.data == _PROBE:
                probes.append(msg.data)
            else:
                pulls.bodies.append(json.loads(msg.data) if msg.data else {})

        subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        sub = await admin.nc.subscribe(subject, cb=seen)
        await admin.nc.flush()
        deadline = time.monotonic() + 10
        while not probes:
            assert time.monotonic() < deadline, "the watching subscription saw no probe"
            await js.nc.publish(subject, _PROBE, reply=admin.nc.new_inbox())
            await asyncio.sleep(0.02)
        return pulls, sub

    def __len__(self) -> int:
        return len(self.bodies)


async def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def _publish(js: JetStream, stream: str, payloads: list[bytes]) -> None:
    for i, data in enumerate(payloads):
        await js.publish(f"{stream}.{i % 3}", data)


@pytest.fixture
async def admin(nats_server: jetstream.EmbeddedServer) -> AsyncIterator[JetStream]:
    async with await jetstream.connect(nats_server.url) as context:
        yield context


# -- 1: no pull storms, progress always possible ----------------------------------------------


async def test_a_message_larger_than_max_bytes_is_reported_once_without_a_pull_storm(
    js: JetStream, admin: JetStream, stream: str
) -> None:
    await _publish(js, stream, [b"x" * 1000])
    consumer = await js.create_consumer(stream, ConsumerConfig(durable_name="big", **EXPLICIT))
    pulls, sub = await Pulls.watch(admin, js, stream, "big")
    warnings: list[jetstream.JetStreamError] = []
    async with consumer.consume(max_bytes=100, error_callback=warnings.append):
        await asyncio.sleep(3.0)  # the observation window: how many pulls in 3 s
    await sub.unsubscribe()
    too_large = [w for w in warnings if isinstance(w, jetstream.MessageTooLargeForPullError)]
    assert len(too_large) == 1, warnings
    assert len(pulls) < 50, f"{len(pulls)} pulls in 3 s (was 8104)"


async def test_threshold_equal_to_max_bytes_delivers_everything_without_a_storm(
    js: JetStream, admin: JetStream, stream: str
) -> None:
    await _publish(js, stream, [b"%03d" % i + b"y" * 60 for i in range(10)])
    consumer = await js.create_consumer(stream, ConsumerConfig(durable_name="thr", **EXPLICIT))
    pulls, sub = await Pulls.watch(admin, js, stream, "thr")
    seen: list[bytes] = []
    started = time.monotonic()
    async with consumer.consume(max_bytes=1000, threshold_bytes=1000) as messages:
        async with asyncio.timeout(20):  # before: stalled at 9 for good
            async for message in messages:
                seen.append(message.data[:3])
                await message.ack()
                if len(seen) == 10:
                    break
    await asyncio.sleep(max(0.0, 3.0 - (time.monotonic() - started)))
    await sub.unsubscribe()
    assert seen == [b"%03d" % i for i in range(10)], "stalled at 9 of 10 before"
    assert len(pulls) < 200, f"{len(pulls)} pulls in 3 s (was 20,724)"


# -- 5: options refused before anything is sent ------------------------------------------------


async def test_bad_options_are_refused_and_nothing_is_sent(
    js: JetStream, admin: JetStream, stream: str
) -> None:
    consumer = await js.create_consumer(stream, ConsumerConfig(durable_name="opt", **EXPLICIT))
    pulls, sub = await Pulls.watch(admin, js, stream, "opt")
    for options in (
        {"threshold_messages": -1},
        {"max_messages": 10, "threshold_messages": 11},
        {"max_bytes": 100, "threshold_bytes": 200},
        {"max_bytes": 0},
        {"heartbeat": 31, "expires": 120},
    ):
        with pytest.raises(jetstream.ClientValidationError):
            consumer.consume(**options)
    for options in ({"max_bytes": 0}, {"max_bytes": -1}, {"heartbeat": 31, "expires": 100}):
        with pytest.raises(jetstream.ClientValidationError):
            [m async for m in consumer.fetch(**options)]
    with pytest.raises(jetstream.ClientValidationError):
        await consumer.next(timeout=100, heartbeat=40)
    await admin.nc.flush()
    await sub.unsubscribe()
    assert len(pulls) == 0


async def test_pulls_bounded_in_bytes_are_refused_where_the_server_would_skip_messages(
    js: JetStream, admin: JetStream, stream: str
) -> None:
    """A last_per_subject consumer's first pass comes from a list of each subject's last
    message; nats-server skips a listed message for good when a pull's max_bytes cannot take
    it (seen: a watch of large values missed keys). Such pulls are refused, nothing is sent;
    counted pulls deliver every subject's last message."""
    for round_ in range(2):  # two revisions per subject: the server builds the list
        for i in range(40):
            await js.publish(f"{stream}.s{i:02}", bytes([round_]) * 50_000)
    config = ConsumerConfig(
        durable_name="lps",
        deliver_policy="last_per_subject",
        filter_subject=f"{stream}.>",
        **EXPLICIT,
    )
    consumer = await js.create_consumer(stream, config)
    pulls, sub = await Pulls.watch(admin, js, stream, "lps")
    with pytest.raises(jetstream.ClientValidationError, match="last_per_subject"):
        consumer.consume(max_bytes=1 << 20)
    with pytest.raises(jetstream.ClientValidationError, match="last_per_subject"):
        [m async for m in consumer.fetch(max_bytes=1 << 20)]
    await admin.nc.flush()
    await sub.unsubscribe()
    assert len(pulls) == 0
    taken = [m async for m in consumer.fetch(40, expires=5)]
    assert [m.subject for m in taken] == [f"{stream}.s{i:02}" for i in range(40)]
    assert all(m.data == b"\x01" * 50_000 for m in taken)


# -- 2: drains that end ------------------------------------------------------------------------


async def test_a_drain_with_nothing_buffered_ends_at_once(js: JetStream, stream: str) -> None:
    consumer = await js.create_consumer(stream, ConsumerConfig(durable_name="dr", **EXPLICIT))
    await _publish(js, stream, [b"a", b"b"])
    messages = await consumer.consume(expires=30)
    seen = [await asyncio.wait_for(messages.__anext__(), 5) for _ in range(2)]
    started = time.monotonic()
    draining = asyncio.create_task(messages.drain())
    rest = [m async for m in messages]
    await asyncio.wait_for(draining, 5)
    assert [m.data for m in seen] == [b"a", b"b"] and rest == []
    assert time.monotonic() - started < 5, "waited for the 30 s pull to expire before"


async def test_a_drain_ends_across_a_reconnect(
    stream: str, js: JetStream, nats_server: jetstream.EmbeddedServer
) -> None:
    proxy = await TcpProxy(nats_server.port).start()
    try:
        async with await jetstream.connect(
            proxy.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1
        ) as cut_js:
            consumer = await cut_js.create_consumer(
                stream, ConsumerConfig(durable_name="drc", **EXPLICIT)
            )
            await _publish(js, stream, [b"%d" % i for i in range(20)])
            delivered: list[bytes] = []

            async def handle(message: jetstream.PullMessage) -> None:
                delivered.append(message.data)
                await message.ack()

            handle_stream = await consumer.consume(handle, max_messages=5, expires=30)
            await _until(lambda: len(delivered) == 20)
            proxy.cut()
            await _until(lambda: not cut_js.nc.is_connected, 5)
            await asyncio.wait_for(handle_stream.drain(), 10)  # never returned before
    finally:
        await proxy.close()


# -- 3: a consumer deleted under a backlog ----------------------------------------------------


async def test_a_consumer_deleted_under_a_backlog_ends_consume_with_a_typed_error(
    js: JetStream, stream: str
) -> None:
    await _publish(js, stream, [b"%d" % i for i in range(100)])
    consumer = await js.create_consumer(stream, ConsumerConfig(durable_name="del", **EXPLICIT))
    warnings: list[jetstream.JetStreamError] = []
    received = 0
    async with consumer.consume(max_messages=10, error_callback=warnings.append) as messages:
        with pytest.raises(jetstream.ConsumerDeletedError):
            async with asyncio.timeout(15):  # before: never ended
                async for _message in messages:
                    received += 1
                    if received == 1:  # 10 buffered, none left waiting: no 409 will come
                        await js.delete_consumer(stream, "del")
    assert 1 <= received <= 20, "the buffered messages, then the end"
    assert len(warnings) <= 1, f"{len(warnings)} warnings (a burst of ~50 before)"


# -- 4: consumer limits are warnings after which consume recovers --------------------------------


@pytest.mark.parametrize(
    ("limit", "options", "says"),
    [
        ({"max_batch": 3}, {"max_messages": 100}, "MaxRequestBatch"),
        ({"max_expires": 2}, {"expires": 30}, "MaxRequestExpires"),
        ({"max_bytes": 1000}, {"max_bytes": 10_000}, "MaxRequestMaxBytes"),
    ],
)
async def test_a_consumer_limit_is_a_warning_and_consume_adjusts_to_it(
    js: JetStream,
    admin: JetStream,
    stream: str,
    limit: dict[str, Any],
    options: dict[str, Any],
    says: str,
) -> None:
    await _publish(js, stream, [b"%02d" % i + b"z" * 50 for i in range(30)])
    consumer = await js.create_consumer(
        stream, ConsumerConfig(durable_name="lim", **limit, **EXPLICIT)
    )
    pulls, sub = await Pulls.watch(admin, js, stream, "lim")
    warnings: list[jetstream.JetStreamError] = []
    seen: list[bytes] = []
    async with consumer.consume(**options, error_callback=warnings.append) as messages:
        async with asyncio.timeout(20):  # before: ended at once with PullRequestError
            async for message in messages:
                seen.append(message.data[:2])
                await message.ack()
                if len(seen) == 30:
                    break
    await sub.unsubscribe()
    assert seen == [b"%02d" % i for i in range(30)]
    refusals = [w for w in warnings if isinstance(w, jetstream.PullRequestError)]
    assert len(refusals) == 1 and says in str(refusals[0]), warnings
    assert len(pulls) < 100, f"{len(pulls)} pulls"


async def test_max_waiting_is_a_warning_and_consume_goes_on(
    js: JetStream, admin: JetStream, stream: str
) -> None:
    consumer = await js.create_consumer(
        stream, ConsumerConfig(durable_name="mw", max_waiting=1, **EXPLICIT)
    )
    # Another client's pull holds the only waiting slot.
    inbox = admin.nc.new_inbox()
    other = await admin.nc.subscribe(inbox)
    await admin.nc.publish(
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.mw", b'{"batch":1,"expires":30000000000}', reply=inbox
    )
    await admin.nc.flush()
    warnings: list[jetstream.JetStreamError] = []
    seen: list[bytes] = []
    async with consumer.consume(expires=2, error_callback=warnings.append) as messages:
        # about 5 s on a quiet machine (the refused pull, then the next one); the bound only
        # guards against a hang, and a busy CI machine took longer than 10 s once
        await _until(lambda: bool(warnings), timeout=30.0)
        await _publish(js, stream, [b"%d" % i for i in range(21)])
        async with asyncio.timeout(20):
            async for message in messages:
                seen.append(message.data)
                await message.ack()
                if len(seen) == 20:
                    break
    await other.unsubscribe()
    assert sorted(seen, key=int) == [b"%d" % i for i in range(1, 21)]
    # nats-server 2.15.1 answers 409 Exceeded MaxWaiting to the *evicted* oldest pull (the
    # other client's) and then stays silent on ours: missed heartbeats reset and re-pull.
    assert all(isinstance(w, jetstream.HeartbeatMissedError) for w in warnings), warnings


# -- 6: heartbeats on fetch and next -----------------------------------------------------------


async def test_long_fetches_ask_for_heartbeats_by_default(
    js: JetStream, admin: JetStream, stream: str
) -> None:
    await _publish(js, stream, [b"a", b"b"])
    consumer = await js.create_consumer(stream, ConsumerConfig(durable_name="hbf", **EXPLICIT))
    pulls, sub = await Pulls.watch(admin, js, stream, "hbf")
    assert len(await consumer.fetch(1, expires=40)) == 1
    assert len([m async for m in consumer.fetch(1, expires=10)]) == 1
    # flush() returns once the PONG arrived, maybe before the subscription's task ran the
    # callback for the last request (bodies[1] was missing once under load)
    await _until(lambda: len(pulls) == 2)
    await sub.unsubscribe()
    assert pulls.bodies[0]["idle_heartbeat"] == 5_000_000_000, "ADR-37: on above 30 s"
    assert "idle_heartbeat" not in pulls.bodies[1]


async def test_fetch_and_next_end_when_heartbeats_stop(
    unique_name: Callable[[str], str],
) -> None:
    async with (
        jetstream.EmbeddedServer() as server,
        await jetstream.connect(server.url, ping_interval=60) as js,
    ):
        name = unique_name("HF")
        await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
        consumer = await js.create_consumer(name, ConsumerConfig(durable_name="h", **EXPLICIT))

        async def fetch_all() -> list[jetstream.PullMessage]:
            return [m async for m in consumer.fetch(5, expires=30, heartbeat=0.5)]

        for call in (fetch_all, lambda: consumer.next(timeout=30, heartbeat=0.5)):
            task = asyncio.ensure_future(call())
            await asyncio.sleep(0.3)  # the pull is waiting on the server
            server.pause()
            try:
                started = time.monotonic()
                with pytest.raises(jetstream.HeartbeatMissedError):
                    await asyncio.wait_for(task, 10)  # before: waited out the 30 s pull
                assert time.monotonic() - started < 5
            finally:
                server.resume()


# -- 7: typed errors on a closed connection ----------------------------------------------------


async def test_a_closed_connection_gives_typed_errors(
    nats_server: jetstream.EmbeddedServer, stream: str, js: JetStream
) -> None:
    await js.create_consumer(stream, ConsumerConfig(durable_name="cl", **EXPLICIT))
    async with await jetstream.connect(nats_server.url) as other:
        consumer = await other.consumer(stream, "cl")
        await other.nc.close()  # the connection under the context, not the context
        with pytest.raises(jetstream.ConnectionClosedError):
            [m async for m in consumer.fetch(1, expires=1)]
        with pytest.raises(jetstream.ConnectionClosedError):
            await consumer.next(timeout=1)
        with pytest.raises(jetstream.ConnectionClosedError):
            await consumer.consume()


# -- 8: the remaining statuses ------------------------------------------------------------------


async def test_batch_completed_with_pending_counts_keeps_consume_going(
    js: JetStream, admin: JetStream, stream: str
) -> None:
    # A batch cap under byte mode: every pull ends "409 Batch Completed" with bytes left.
    await _publish(js, stream, [b"%02d" % i for i in range(40)])
    consumer = await js.create_consumer(
        stream, ConsumerConfig(durable_name="bc", max_batch=4, **EXPLICIT)
    )
    pulls, sub = await Pulls.watch(admin, js, stream, "bc")
    seen: list[bytes] = []
    async with consumer.consume(max_bytes=100_000) as messages:
        async with asyncio.timeout(20):
            async for message in messages:
                seen.append(message.data)
                await message.ack()
                if len(seen) == 40:
                    break
    await sub.unsubscribe()
    assert seen == [b"%02d" % i for i in range(40)]
    assert len(pulls) < 60, f"{len(pulls)} pulls for 40 messages in batches of 4"


async def test_a_bad_request_ends_consume(js: JetStream, stream: str) -> None:
    # A consumer with a priority group refuses pulls that name none: 400 Bad Request.
    config = {
        "durable_name": "pg",
        "ack_policy": "explicit",
        "priority_groups": ["A"],
        "priority_policy": "pinned_client",
    }
    body = json.dumps({"stream_name": stream, "config": config}).encode()
    reply = await js.nc.request(f"$JS.API.CONSUMER.CREATE.{stream}.pg", body, timeout=5)
    assert b'"error"' not in reply.data, reply.data
    consumer = await js.consumer(stream, "pg")
    async with consumer.consume(expires=2) as messages:
        with pytest.raises(jetstream.PullRequestError) as raised:
            await asyncio.wait_for(messages.__anext__(), 10)
    assert raised.value.code == 400


async def test_a_full_buffer_is_not_reported_as_missed_heartbeats(
    js: JetStream, stream: str
) -> None:
    # With the buffer full no pull is waiting, so the server sends no heartbeats: silence then
    # is not a fault (it was reported as HeartbeatMissedError every 2 heartbeats).
    await _publish(js, stream, [b"%d" % i for i in range(10)])
    consumer = await js.create_consumer(stream, ConsumerConfig(durable_name="full", **EXPLICIT))
    warnings: list[jetstream.JetStreamError] = []
    async with consumer.consume(
        max_messages=5, expires=1, heartbeat=0.5, error_callback=warnings.append
    ) as messages:
        first = await asyncio.wait_for(messages.__anext__(), 5)
        await _until(lambda: len(messages._puller.queue._items) == 4)  # all delivered
        await asyncio.sleep(2.0)  # 4 heartbeat intervals with the buffer full
        assert warnings == []
        await first.ack()
        rest = [await asyncio.wait_for(messages.__anext__(), 5) for _ in range(9)]
    assert [m.data for m in rest] == [b"%d" % i for i in range(1, 10)]
