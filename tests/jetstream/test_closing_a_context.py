"""Closing a context, in any state: close() never raises and is bounded (also while reconnecting,
with a watch open on a paused server, or when the server stalls mid-close), what was published
before it reaches the server, every public call made after it raises ConnectionClosedError, and
calls and iterations running at that moment end with it."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client

import jetstream
import kvstore
import objstore
from jetstream import ConsumerConfig, StreamConfig

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("garbage_collected")]


async def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def test_leaving_the_block_while_reconnecting_closes_for_good(
    own_server: jetstream.EmbeddedServer,
) -> None:
    reconnects: list[int] = []

    async def reconnected() -> None:
        reconnects.append(1)

    js = await jetstream.connect(
        own_server.url,
        reconnect_time_wait=0.05,
        max_reconnect_attempts=-1,
        reconnected_cb=reconnected,
    )
    async with js:
        await js.account_info()
        own_server.kill()
        await _until(lambda: js.nc.is_reconnecting)
    # Leaving the block neither raised (it raised ConnectionReconnectingError) nor left it open.
    assert js.nc.is_closed and js.is_closed
    own_server.start()  # same port: a client that still tried would reconnect now
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:  # a negative: give a live reconnect loop its chance
        assert not reconnects and js.nc.is_closed
        await asyncio.sleep(0.05)
    with pytest.raises(jetstream.ConnectionClosedError):
        await js.account_info()


async def test_close_never_raises_and_is_bounded_whatever_the_state(
    own_server: jetstream.EmbeddedServer,
) -> None:
    # A server that stopped answering (paused): the drain cannot finish, close still returns.
    js = await jetstream.connect(own_server.url, timeout=1.0, allow_reconnect=False)
    own_server.pause()
    try:
        started = time.monotonic()
        await js.close()
        assert time.monotonic() - started < 4.0
        assert js.nc.is_closed
    finally:
        own_server.resume()
    await js.close()  # twice: nothing happens
    # A connection the server dropped for good (no reconnect allowed): closed already.
    js = await jetstream.connect(own_server.url, allow_reconnect=False)
    own_server.kill()
    await _until(lambda: js.nc.is_closed)
    async with js:
        pass
    assert js.is_closed


async def test_close_with_a_watch_on_a_paused_server_is_bounded_and_logs_nothing(
    own_server: jetstream.EmbeddedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """helper-40: with subscriptions open (a watch, the reply inbox), nats-py's drain swallows
    the cancel that ends it and waits out its own 10 s flush; close() took 11 s and asyncio
    logged "_GatheringFuture exception was never retrieved" (the CLI printed it on Ctrl-C)."""
    js = await jetstream.connect(own_server.url, timeout=0.5, allow_reconnect=False)
    bucket = await kvstore.create_bucket(js, "pausedclose")
    await bucket.put("k", b"v")
    watcher = bucket.watch()
    await watcher.__aenter__()
    assert (await watcher.__anext__()).key == "k"
    own_server.pause()
    try:
        started = time.monotonic()
        with caplog.at_level(logging.DEBUG):
            await js.close()
            await asyncio.sleep(0)
            gc.collect()  # a future dropped with its exception unretrieved is logged now
        assert time.monotonic() - started < 3.0
        assert js.nc.is_closed
    finally:
        own_server.resume()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
    with contextlib.suppress(Exception):
        await watcher.__aexit__(None, None, None)


async def _drive(result: Any) -> None:
    """Make a call do its I/O: await it, enter it, or take its first item."""
    if inspect.isawaitable(result):
        result = await result
        if not hasattr(result, "__aenter__") and not hasattr(result, "__anext__"):
            return
    if hasattr(result, "__aenter__"):
        async with result as entered:
            if hasattr(entered, "__anext__"):
                await entered.__anext__()
        return
    if hasattr(result, "__anext__"):
        await result.__anext__()
        return
    raise AssertionError(f"{result!r} does no I/O: list it in NO_IO")


def _public_methods(cls: type) -> list[str]:
    return sorted(
        name
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_")
        and callable(member)
        and not isinstance(inspect.getattr_static(cls, name), property)
    )


async def _assert_all_closed(
    obj: object, samples: dict[str, Any], no_io: set[str], overrides: dict[str, Any]
) -> list[str]:
    """Call every public method of ``obj`` with arguments taken from ``samples`` by parameter
    name; each must raise ConnectionClosedError. Returns the names checked."""
    checked = []
    for name in _public_methods(type(obj)):
        if name in no_io:
            continue
        method = getattr(obj, name)
        if name in overrides:
            call: Callable[[], Any] = overrides[name]
        else:
            params = inspect.signature(method).parameters.values()
            required = [
                p for p in params if p.default is p.empty and p.kind not in (p.VAR_KEYWORD,)
            ]
            missing = [p.name for p in required if p.name not in samples]
            assert not missing, f"{type(obj).__name__}.{name}: no sample for {missing}"
            args = {p.name: samples[p.name] for p in required}
            call = lambda method=method, args=args: method(**args)  # noqa: E731
        with pytest.raises(jetstream.ConnectionClosedError) as raised:
            await _drive(call())
        assert isinstance(raised.value, jetstream.JetStreamError), name
        checked.append(name)
    return checked


@pytest.fixture
async def closed_world(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
) -> AsyncIterator[dict[str, Any]]:
    """A bucket, a store, a stream with a consumer and a delivered message, all bound to a
    context that is then closed."""
    bucket_name, store_name, stream = unique_name("kv"), unique_name("os"), unique_name("S")
    await kvstore.create_bucket(js, bucket_name)
    await objstore.create_store(js, store_name)
    await js.add_stream(StreamConfig(name=stream, subjects=[f"{stream}.>"]))
    await js.publish(f"{stream}.a", b"1")
    await js.create_consumer(stream, ConsumerConfig(durable_name="c", ack_policy="explicit"))
    closed = await jetstream.connect(nats_server.url)
    world = {
        "js": closed,
        "stream": stream,
        "bucket": await kvstore.open_bucket(closed, bucket_name),
        "store": await objstore.open_store(closed, store_name),
        "consumer": await closed.consumer(stream, "c"),
    }
    world["message"] = await world["consumer"].next()
    await closed.close()
    yield world
    await kvstore.delete_bucket(js, bucket_name)
    await objstore.delete_store(js, store_name)
    await js.delete_stream(stream)


async def test_every_public_call_on_a_closed_context_raises_connection_closed(
    closed_world: dict[str, Any], tmp_path: Path
) -> None:
    closed: jetstream.JetStream = closed_world["js"]
    stream: str = closed_world["stream"]
    closed_error = jetstream.ConnectionClosedError
    assert issubclass(closed_error, jetstream.JetStreamError)
    assert issubclass(closed_error, ConnectionError)

    checked = await _assert_all_closed(
        closed,
        {
            "stream": stream,
            "name": "c",
            "subject": f"{stream}.a",
            "subjects": [f"{stream}.a"],
            "seq": 1,
            "data": b"x",
            "payload": b"x",
            "feature": jetstream.Feature.MESSAGE_TTL,
            "config": ConsumerConfig(durable_name="c2"),
            "consumer": "c",
            "group": "PCG",
            "until": None,
            "response_type": jetstream.StreamInfo,
        },
        # awaiting_reply() marks a wait that send() or a batched get then does
        no_io={"close", "ensure_open", "check_loop", "note_error", "awaiting_reply"},
        overrides={
            "add_stream": lambda: closed.add_stream(StreamConfig(name="X", subjects=["x"])),
            "update_stream": lambda: closed.update_stream(StreamConfig(name=stream)),
        },
    )
    assert {"publish", "send", "request", "stream_names", "get_last_messages"} <= set(checked)

    bucket: kvstore.Bucket = closed_world["bucket"]
    checked = await _assert_all_closed(
        bucket,
        {
            "key": "k",
            "value": b"v",
            "revision": 1,
            "keys": ["k"],
            "items": {"k": b"v"},
            "name": "lk",
        },
        # typed() makes a view; rekey() refuses a bucket without encryption= before any I/O;
        # decode_entry() decodes a message in hand; election() makes a handle (its campaign
        # and leader() are what talk to the server)
        no_io={"batch", "typed", "rekey", "decode_entry", "election"},
        overrides={},
    )
    assert {"put", "get", "watch", "keys", "get_many", "put_many"} <= set(checked)
    key_batch = bucket.batch()
    key_batch.put("k", b"v")
    with pytest.raises(closed_error):
        await key_batch.commit()

    store: objstore.ObjectStore = closed_world["store"]
    checked = await _assert_all_closed(
        store,
        {
            "name": "o",
            "source": b"data",
            "target": "t",
            "store": store,
            "path": tmp_path / "o",
        },
        no_io={"rekey"},  # refuses a store without encryption= before any I/O
        overrides={},
    )
    assert {"put", "get_bytes", "get_file", "list", "watch", "open"} <= set(checked)

    consumer: jetstream.Consumer = closed_world["consumer"]
    checked = await _assert_all_closed(
        consumer, {}, no_io={"pin_id"}, overrides={"consume": lambda: consumer.consume()}
    )
    assert {"consume", "fetch", "next", "info"} <= set(checked)
    await _assert_all_closed(closed_world["message"], {}, no_io=set(), overrides={})

    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: _drive(jetstream.OrderedConsumer(closed, stream)),
        lambda: jetstream.OrderedConsumer(closed, stream).start(),
        lambda: jetstream.FastPublisher(closed).add(f"{stream}.a", b"x"),
        lambda: kvstore.create_bucket(closed, "nope"),
        lambda: kvstore.open_bucket(closed, "nope"),
        lambda: _drive(kvstore.list_buckets(closed)),
        lambda: objstore.create_store(closed, "nope"),
        lambda: objstore.open_store(closed, "nope"),
        lambda: _drive(objstore.list_stores(closed)),
    ]
    for call in calls:
        with pytest.raises(closed_error):
            await call()
    batch = jetstream.AtomicBatch(closed, stream=stream)
    batch.add(f"{stream}.a", b"x")
    with pytest.raises(closed_error):
        await batch.commit()


async def test_closing_a_context_ends_a_retrying_get_many_on_a_callers_connection(
    own_server: jetstream.EmbeddedServer,
) -> None:
    """helper-39: a get_many retrying timeouts kept asking through a closed context (around
    the caller's own nats-py client, which close() leaves open) until the retry deadline."""
    import nats

    nc = await nats.connect(own_server.url)
    js = jetstream.JetStream(nc, timeout=0.5, retry_deadline=10.0)
    try:
        bucket = await kvstore.create_bucket(js, "closeretry")
        await bucket.put("k", b"v")
        own_server.pause()
        try:
            reading = asyncio.ensure_future(bucket.get_many(["k"]))
            await asyncio.sleep(1.2)  # past the first timeout: retrying
            await js.close()
            started = time.monotonic()
            with pytest.raises(jetstream.ConnectionClosedError):
                await reading
            assert time.monotonic() - started < 1.0
        finally:
            own_server.resume()
        async with jetstream.JetStream(nc) as again:
            await kvstore.delete_bucket(again, "closeretry")
    finally:
        await nc.close()


async def test_iterations_running_when_the_context_closes_end_with_connection_closed(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
) -> None:
    """A watch or consume waiting for messages does not wait forever once its context closes
    (it waited for a reconnect that never comes)."""
    name, stream = unique_name("kv"), unique_name("S")
    await kvstore.create_bucket(js, name)
    await js.add_stream(StreamConfig(name=stream, subjects=[f"{stream}.>"]))
    await js.create_consumer(stream, ConsumerConfig(durable_name="c"))
    other = await jetstream.connect(nats_server.url)
    bucket = await kvstore.open_bucket(other, name)
    consumer = await other.consumer(stream, "c")
    started = [asyncio.Event(), asyncio.Event()]

    async def watch() -> None:
        async with bucket.watch(updates_only=True) as watcher:
            started[0].set()
            async for _ in watcher:
                pass

    async def consume() -> None:
        async with consumer.consume() as messages:
            started[1].set()
            async for _ in messages:
                pass

    tasks = [asyncio.create_task(watch()), asyncio.create_task(consume())]
    try:
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started)), 5)
        await other.close()
        done, pending = await asyncio.wait(tasks, timeout=5)
        assert not pending, "an iteration still waits after close()"
        for task in done:
            assert isinstance(task.exception(), jetstream.ConnectionClosedError), task
    finally:
        for task in tasks:
            task.cancel()
        await other.close()
        await kvstore.delete_bucket(js, name)
        await js.delete_stream(stream)


async def test_close_bounded_when_server_stalls_mid_close(
    own_server: jetstream.EmbeddedServer,
) -> None:
    """A subscription still holds messages its reader has not taken (as a fetch being
    iterated does), close() starts, then the server stops answering. close() took 10.5 s
    with timeout=0.5: the ping was answered, nats-py's drain started, swallowed the cancel
    that ended it and waited out its own 10 s flush. close() no longer drains."""
    js = await jetstream.connect(own_server.url, timeout=0.5, allow_reconnect=False)
    sub = await js.nc.subscribe("review9.unread")
    for i in range(3):
        await js.nc.publish("review9.unread", b"%d" % i)
    await js.nc.flush()  # the three messages are in the subscription's queue, unread
    closing = asyncio.create_task(js.close())
    await asyncio.sleep(0)  # close() is under way
    own_server.pause()
    try:
        started = time.monotonic()
        await asyncio.wait_for(asyncio.shield(closing), 30)
        took = time.monotonic() - started
    finally:
        own_server.resume()
    assert js.nc.is_closed
    assert took < 3.0, f"close() took {took:.1f} s with timeout=0.5"
    del sub


async def test_what_was_published_before_close_reaches_the_server(
    own_server: jetstream.EmbeddedServer,
) -> None:
    """close() flushes instead of draining: a publish just before it is still delivered."""
    js = await jetstream.connect(own_server.url)
    listener = await jetstream.connect(own_server.url)
    try:
        sub = await listener.nc.subscribe("review9.last")
        await listener.nc.flush()
        for i in range(1000):
            await js.nc.publish("review9.last", b"%d" % i)
        await js.close()
        got = [await sub.next_msg(timeout=5) for _ in range(1000)]
        assert [m.data for m in got][-1] == b"999"
    finally:
        await listener.close()


async def _live_subscription(
    js: jetstream.JetStream, silent: Client, subject: str, probe: str
) -> None:
    """Subscribe ``silent`` and wait until ``js``'s publishes reach it: a fresh subscription
    once answered the first request with "no responders" (CI-like run), although flushed."""
    seen = asyncio.Event()

    async def note(msg: object) -> None:
        seen.set()

    await silent.subscribe(subject, cb=note)
    await silent.flush()
    deadline = asyncio.get_running_loop().time() + 5
    while not seen.is_set():
        assert asyncio.get_running_loop().time() < deadline, f"{subject}: never delivered"
        await js.nc.publish(probe, b"")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(seen.wait(), 0.2)


CLOSERS = {
    "context": lambda js: js.close(),
    "client": lambda js: js.nc.close(),
    "client drained": lambda js: js.nc.drain(),
}


@pytest.mark.parametrize("closer", sorted(CLOSERS))
async def test_a_call_in_flight_when_the_context_closes_ends_with_connection_closed(
    nats_server: jetstream.EmbeddedServer, closer: str
) -> None:
    """Before: the call waited its whole timeout after close(), then said "no reply within
    5s" (RequestTimeoutError), or, retried, ConnectionClosedError 5 s late; closing the nats-py
    client itself (not the context) still did that."""
    js = await jetstream.connect(nats_server.url, timeout=5)
    silent = await nats.connect(nats_server.url)  # takes requests, never answers
    try:
        await _live_subscription(js, silent, "review.silent.>", "review.silent.ready")
        direct_get = js.api.direct_get("review")
        await _live_subscription(js, silent, direct_get, direct_get)
        calls = [
            asyncio.create_task(js.send("review.silent.a", b"")),
            asyncio.create_task(js.publish("review.silent.b", b"x", msg_id="m1")),
            # get_many's batched direct get: a stream name whose DIRECT.GET the silent
            # subscriber takes (nothing answers it)
            asyncio.create_task(js.get_last_messages("review", ["a"])),
        ]
        await asyncio.sleep(0.2)  # both wait for their reply
        started = asyncio.get_running_loop().time()
        await CLOSERS[closer](js)
        for call in calls:
            with pytest.raises(jetstream.ConnectionClosedError):
                await asyncio.wait_for(call, 10)
        assert asyncio.get_running_loop().time() - started < 2
    finally:
        await js.close()
        await silent.close()
