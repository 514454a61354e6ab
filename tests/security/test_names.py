"""Stream and consumer names are checked with the server's rules before they go into an API
subject, and header names before a message goes out: a typed ``ValueError`` at once, nothing
sent (issue 11, finding 8). A spy on the same account sees every API request made."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import nats
import pytest

import jetstream
import kvstore
from jetstream import ConsumerConfig, StreamConfig

BAD_NAMES = [">", "a.b", "", "\x00", "KV_b.>", "*", "a b", "a\tb", "a/b", "a\\b", "x" * 256]
AT_ONCE = 0.5
"""Seconds a refused name may take: no request, no retry (an empty name was retried ~14
times until the 20 s deadline)."""


class Spy:
    """Every ``$JS.API.>`` request and every message to the test stream, seen by a separate
    connection; :meth:`settle` proves the spy is caught up by a marker request."""

    def __init__(self, nc: Any, js: jetstream.JetStream) -> None:
        self.nc = nc
        self.js = js
        self.seen: list[str] = []

    async def settle(self) -> list[str]:
        """What was seen before a marker request (``$JS.API.INFO``) arrived. The marker is sent
        again each second until one is seen (a fresh spy once missed its first marker under
        load); once the spy has seen one, everything sent before the next one reaches it
        first (one connection, in order)."""
        deadline = time.monotonic() + 10
        while "$JS.API.INFO" not in self.seen and time.monotonic() < deadline:
            await self.js.account_info()
            resend = time.monotonic() + 1
            while "$JS.API.INFO" not in self.seen and time.monotonic() < resend:
                await asyncio.sleep(0.01)  # poll step of a bounded wait
        assert "$JS.API.INFO" in self.seen, "the spy saw the marker"
        seen, self.seen = [s for s in self.seen if s != "$JS.API.INFO"], []
        return seen


@pytest.fixture
async def spy(nats_server: jetstream.EmbeddedServer, js: jetstream.JetStream) -> AsyncIterator[Spy]:
    nc = await nats.connect(nats_server.url)
    watcher = Spy(nc, js)

    async def record(msg: Any) -> None:
        watcher.seen.append(msg.subject)

    await nc.subscribe("$JS.API.>", cb=record)
    await nc.subscribe("names.>", cb=record)
    await nc.flush()
    try:
        yield watcher
    finally:
        await nc.close()


@pytest.fixture
async def stream(js: jetstream.JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    name = unique_name("S")
    await js.add_stream(StreamConfig(name=name, subjects=[f"names.{name}.>"], allow_direct=True))
    await js.publish(f"names.{name}.a", b"1")
    try:
        yield name
    finally:
        await js.delete_stream(name)


Call = Callable[[], Awaitable[Any]]


def _calls(js: jetstream.JetStream, stream: str, bad: str) -> dict[str, Call]:
    async def names(iterator: AsyncIterator[str]) -> list[str]:
        return [name async for name in iterator]

    calls: dict[str, Call] = {
        "stream_info": lambda: js.stream_info(bad),
        "delete_stream": lambda: js.delete_stream(bad),
        "purge_stream": lambda: js.purge_stream(bad),
        "add_stream": lambda: js.add_stream(StreamConfig(name=bad, subjects=["names.bad.x"])),
        "update_stream": lambda: js.update_stream(StreamConfig(name=bad, subjects=["names.x"])),
        "delete_message": lambda: js.delete_message(bad, 1),
        "consumer_names": lambda: names(js.consumer_names(bad)),
        "get_last_message": lambda: js.get_last_message(bad, f"names.{stream}.a"),
        "get_message": lambda: js.get_message(bad, 1),
        "get_message leader": lambda: js.get_message(bad, 1, direct=False),
        "get_last_messages": lambda: js.get_last_messages(bad, [f"names.{stream}.a"]),
        "consumer_info": lambda: js.consumer_info(stream, bad),
        "consumer": lambda: js.consumer(stream, bad),
        "delete_consumer": lambda: js.delete_consumer(stream, bad),
        "create_consumer on bad stream": lambda: js.create_consumer(bad, ConsumerConfig()),
        "consumer of bad stream": lambda: js.consumer_info(bad, "ok"),
    }
    if bad:  # an empty consumer name asks create_consumer for a generated one: valid
        calls["create_consumer name"] = lambda: js.create_consumer(stream, ConsumerConfig(name=bad))
        calls["create_consumer durable"] = lambda: js.create_consumer(
            stream, ConsumerConfig(durable_name=bad)
        )
    return calls


@pytest.mark.parametrize("bad", BAD_NAMES, ids=repr)
async def test_bad_stream_and_consumer_names_are_refused_at_once_with_nothing_sent(
    js: jetstream.JetStream, spy: Spy, stream: str, bad: str
) -> None:
    await spy.settle()  # the fixtures' own requests are not counted
    for what, call in _calls(js, stream, bad).items():
        started = time.monotonic()
        with pytest.raises(jetstream.InvalidNameError) as refused:
            await call()
        took = time.monotonic() - started
        assert took < AT_ONCE, f"{what}: {took:.2f}s"
        assert isinstance(refused.value, ValueError), what
        assert isinstance(refused.value, jetstream.ClientValidationError), what
    assert await spy.settle() == [], "nothing was sent for a bad name"
    assert (await js.stream_info(stream)).state.messages == 1, "the stream is untouched"
    assert [name async for name in js.consumer_names(stream)] == []


async def test_every_layer_above_inherits_the_name_check(js: jetstream.JetStream, spy: Spy) -> None:
    await spy.settle()
    for bad in ("b.>", "b*", "", "b\x00"):
        with pytest.raises(jetstream.InvalidNameError):
            await kvstore.open_bucket(js, bad)
        with pytest.raises(jetstream.InvalidNameError):
            await kvstore.create_bucket(js, bad)
    assert await spy.settle() == []


@pytest.mark.parametrize(
    "headers",
    [{"": "x"}, {"a b": "x"}, {"a:b": "x"}, {"a\x00": "x"}, {"a\r\nX-Evil": "1"}, {"ok": "v\r\n"}],
    ids=repr,
)
async def test_bad_header_names_are_refused_before_sending(
    js: jetstream.JetStream, spy: Spy, stream: str, headers: dict[str, str]
) -> None:
    await spy.settle()
    subject = f"names.{stream}.h"
    with pytest.raises(jetstream.InvalidHeaderError):
        await js.publish(subject, b"x", headers=headers)
    with pytest.raises(jetstream.InvalidHeaderError):
        await js.send(subject, b"x", headers=headers)
    async with jetstream.AckedPublisher(js) as batch:
        with pytest.raises(jetstream.InvalidHeaderError):
            await batch.add(subject, b"x", headers)
        await batch.add(subject, b"fine")
    assert await spy.settle() == [subject], "only the good message went out"
    assert (await js.stream_info(stream)).state.messages == 2
    assert js.nc.is_connected, "the connection stayed up"
