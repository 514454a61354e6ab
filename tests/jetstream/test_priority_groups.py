"""ADR-42 pinned priority groups on a real server (2.15.1): pulls carry the group and the pin
id, only the pinned client receives, the pin fails over after ``priority_timeout`` when the
pinned client stops, unpin moves it, and a 423 never reaches the user."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import jetstream
from jetstream import ConsumerConfig, JetStream, PullMessage, StreamConfig

pytestmark = pytest.mark.integration
GROUP = "PCG"
TIMEOUT = 2.0  # priority_timeout of the test consumers, seconds


@pytest.fixture(autouse=True)
def _collect() -> Iterator[None]:
    yield
    gc.collect()


@pytest.fixture
async def stream(js: JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    name = unique_name("PG")
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    yield name
    await js.delete_stream(name)


def pinned_config(name: str = "C") -> ConsumerConfig:
    return ConsumerConfig(
        durable_name=name,
        ack_policy="explicit",
        priority_groups=[GROUP],
        priority_policy="pinned_client",
        priority_timeout=TIMEOUT,
    )


@dataclass
class Client:
    """One client of the group: its own connection, consumer object and received subjects."""

    js: JetStream
    consumer: jetstream.Consumer
    got: list[str] = field(default_factory=list)
    errors: list[jetstream.JetStreamError] = field(default_factory=list)
    stream: jetstream.MessageStream | None = None

    async def start(self) -> None:
        async def handle(msg: PullMessage) -> None:
            self.got.append(msg.subject)
            await msg.ack()

        self.stream = await self.consumer.consume(
            handle, group=GROUP, error_callback=self.errors.append
        )

    async def stop(self) -> None:
        if self.stream is not None:
            await self.stream.stop()


@pytest.fixture
async def clients(
    nats_server: jetstream.EmbeddedServer, js: JetStream, stream: str
) -> AsyncIterator[Callable[[], Awaitable[Client]]]:
    await js.create_consumer(stream, pinned_config())
    made: list[Client] = []

    async def make() -> Client:
        other = await jetstream.connect(nats_server.url)
        client = Client(other, await other.consumer(stream, "C"))
        made.append(client)
        return client

    yield make
    for client in made:
        await client.stop()
        await client.js.close()


async def nothing() -> None:
    pass


async def until(
    condition: Callable[[], bool], deadline: float, tick: Callable[[], Awaitable[None]]
) -> float:
    """Call ``tick`` every 0.1 s until ``condition()``; the seconds it took (fails after
    ``deadline``)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not condition():
        assert loop.time() - start < deadline, "condition not reached in time"
        await tick()
        await asyncio.sleep(0.1)
    return loop.time() - start


async def test_config_and_info_show_the_group_and_its_pin(js: JetStream, stream: str) -> None:
    info = await js.create_consumer_info(stream, pinned_config())
    assert info.config is not None
    assert info.config.priority_groups == [GROUP]
    assert info.config.priority_policy == "pinned_client"
    assert info.config.priority_timeout is not None
    assert info.config.priority_timeout.total_seconds() == TIMEOUT
    assert info.priority_groups is not None
    assert [(g.group, g.pinned) for g in info.priority_groups] == [(GROUP, False)]

    await js.publish(f"{stream}.a", b"1")
    consumer = await js.consumer(stream, "C")
    msg = await consumer.next(group=GROUP)
    pin = msg.headers[jetstream.headers.PIN_ID]
    assert consumer.pin_id(GROUP) == pin
    (state,) = (await consumer.info()).priority_groups or []
    assert state.pinned and state.pinned_client_id == pin and state.pinned_ts is not None


async def test_only_the_pinned_client_receives(
    js: JetStream, stream: str, clients: Callable[[], Awaitable[Client]]
) -> None:
    a, b = await clients(), await clients()
    await a.start()
    await js.publish(f"{stream}.first", b"")
    await until(lambda: bool(a.got), 5, nothing)
    await b.start()
    for i in range(30):  # across several pull periods (expires is TIMEOUT / 2)
        await js.publish(f"{stream}.{i}", b"")
        await asyncio.sleep(0.1)
    await until(lambda: len(a.got) == 31, 5, nothing)
    assert b.got == []
    (state,) = (await js.consumer_info(stream, "C")).priority_groups or []
    assert state.pinned_client_id == a.consumer.pin_id(GROUP) != ""
    assert a.errors == [] and b.errors == []


async def test_the_other_client_is_pinned_after_the_pinned_one_stops(
    js: JetStream, stream: str, clients: Callable[[], Awaitable[Client]]
) -> None:
    a, b = await clients(), await clients()
    await a.start()
    await js.publish(f"{stream}.first", b"")
    await until(lambda: bool(a.got), 5, nothing)
    await b.start()
    await a.stop()  # its pulls stop; the pin expires TIMEOUT after the last one
    n = 0

    async def publish() -> None:
        nonlocal n
        n += 1
        await js.publish(f"{stream}.after{n}", b"")

    took = await until(lambda: bool(b.got), TIMEOUT + 3, publish)
    assert took < TIMEOUT + 3
    assert b.consumer.pin_id(GROUP) not in ("", a.consumer.pin_id(GROUP))
    assert b.errors == []


async def test_unpin_moves_the_pin_and_the_423_is_not_an_error(
    js: JetStream, stream: str, clients: Callable[[], Awaitable[Client]]
) -> None:
    a, b = await clients(), await clients()
    await a.start()
    await js.publish(f"{stream}.first", b"")
    await until(lambda: bool(a.got), 5, nothing)
    old_pin = a.consumer.pin_id(GROUP)
    await b.start()
    statuses: list[str] = []  # every pull status sent to the two clients' inboxes

    async def spy(msg: Any) -> None:
        if msg.headers and "Status" in msg.headers:
            statuses.append(msg.headers["Status"])

    await js.nc.subscribe("_INBOX.>", cb=spy)
    await js.nc.flush()
    await js.unpin_consumer(stream, "C", GROUP)
    (state,) = (await js.consumer_info(stream, "C")).priority_groups or []
    assert not state.pinned
    n = 0

    async def publish() -> None:
        nonlocal n
        n += 1
        await js.publish(f"{stream}.after{n}", b"")

    await until(lambda: len(a.got) + len(b.got) > 1, 5, publish)
    # A's waiting pull, still carrying the old pin, was answered 423: A dropped the pin.
    await until(lambda: a.consumer.pin_id(GROUP) != old_pin, 5, publish)
    await until(lambda: "423" in statuses, 5, publish)
    (state,) = (await js.consumer_info(stream, "C")).priority_groups or []
    assert state.pinned_client_id not in ("", old_pin)
    assert state.pinned_client_id in (a.consumer.pin_id(GROUP), b.consumer.pin_id(GROUP))
    # consuming goes on, for whoever is pinned, and neither saw an error
    before = len(a.got) + len(b.got)
    await until(lambda: len(a.got) + len(b.got) > before, 5, publish)
    assert a.errors == [] and b.errors == []


async def test_fetch_of_a_client_that_lost_the_pin_ends_quietly(
    js: JetStream, stream: str, clients: Callable[[], Awaitable[Client]]
) -> None:
    a, b = await clients(), await clients()
    await js.publish(f"{stream}.x", b"")
    first = await a.consumer.next(group=GROUP)
    await first.ack()
    a_pin = a.consumer.pin_id(GROUP)
    await js.unpin_consumer(stream, "C", GROUP)
    await js.publish(f"{stream}.y", b"")
    got_b = await b.consumer.next(group=GROUP)  # nobody pinned: B is
    assert b.consumer.pin_id(GROUP) not in ("", a_pin)
    await got_b.ack()
    # A still carries its old pin: the server answers 423; fetch ends without an error
    assert [m async for m in a.consumer.fetch(5, expires=1, group=GROUP)] == []
    assert a.consumer.pin_id(GROUP) == ""


async def test_unpin_errors_are_typed(js: JetStream, stream: str) -> None:
    await js.create_consumer(stream, pinned_config())
    with pytest.raises(jetstream.PriorityGroupNotFoundError):
        await js.unpin_consumer(stream, "C", "other")
    with pytest.raises(jetstream.ConsumerNotFoundError):
        await js.unpin_consumer(stream, "nope", GROUP)
    for bad in ("", "a.b", "x" * 17, "sp ace"):
        with pytest.raises(jetstream.ClientValidationError):
            await js.unpin_consumer(stream, "C", bad)
    consumer = await js.consumer(stream, "C")
    with pytest.raises(jetstream.ClientValidationError):
        consumer.consume(group="a.b")


async def test_a_pull_without_the_group_is_refused(js: JetStream, stream: str) -> None:
    consumer = await js.create_consumer(stream, pinned_config())
    await js.publish(f"{stream}.x", b"")
    with pytest.raises(jetstream.PullRequestError, match="400"):
        await consumer.next(timeout=1)


async def test_a_pinned_client_with_a_full_buffer_keeps_its_pin(
    js: JetStream, stream: str, clients: Callable[[], Awaitable[Client]]
) -> None:
    """A slow pinned client whose buffer is full sends no pull, yet keeps its pin (a pull
    that can take nothing goes out instead): the other client gets none of the messages
    while the pinned one still works through its buffer (before: the pin lapsed
    ``priority_timeout`` after its last pull and the other client received the rest)."""
    a, b = await clients(), await clients()
    taken: list[str] = []
    async with a.consumer.consume(group=GROUP, max_messages=2) as slow:
        await js.publish(f"{stream}.first", b"")
        first = await asyncio.wait_for(anext(slow), 5)  # the pin is a's
        taken.append(first.subject)
        await b.start()
        for i in range(6):
            await js.publish(f"{stream}.{i}", b"")
        while (await js.consumer_info(stream, "C")).num_ack_pending < 3:  # 1 taken + 2
            await asyncio.sleep(0.05)
        loop = asyncio.get_running_loop()
        end = loop.time() + 3 * TIMEOUT  # the buffer stays full: no pull can go out
        while loop.time() < end:
            await js.publish(f"{stream}.later", b"")
            await asyncio.sleep(0.2)
        assert b.got == []
        (state,) = (await js.consumer_info(stream, "C")).priority_groups or []
        assert state.pinned_client_id == a.consumer.pin_id(GROUP)
        await first.ack()
        for _ in range(2):  # what the buffer held is a's, in order
            msg = await anext(slow)
            taken.append(msg.subject)
            await msg.ack()
    assert taken == [f"{stream}.first", f"{stream}.0", f"{stream}.1"]
    assert b.errors == []
