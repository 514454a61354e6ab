"""Hostile review of the merged KV and connection hardening: cancellation, close while calls
are in flight, durations at their limits. All on real servers."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

import nats
import pytest
from nats.aio.client import Client

import jetstream
import kvstore
from kvstore import Bucket

# -- durations at their limits ---------------------------------------------------------------


@pytest.mark.parametrize("value", [1e20, 10**20, 1e300, 10**13, timedelta(days=999_999_999)])
def test_a_duration_beyond_go_s_range_is_a_typed_error(value: object) -> None:
    # Before: OverflowError from timedelta (1e20 s), or a value past int64 nanoseconds sent on.
    with pytest.raises(jetstream.ClientValidationError, match="ack_wait"):
        jetstream.ConsumerConfig(ack_wait=value)  # type: ignore[arg-type]
    with pytest.raises(jetstream.ClientValidationError, match="max_age"):
        kvstore.BucketConfig(max_age=value)  # type: ignore[arg-type]


# -- cancellation while a watch or consumer stops ----------------------------------------------


async def test_cancelling_a_task_that_stops_a_watch_cancels_it(bucket: Bucket) -> None:
    """A cancel that lands while the watch stops its puller must not be swallowed: an
    iteration cancelled during a consumer reset kept waiting for entries forever."""
    await bucket.put("a", b"1")
    for _ in range(5):
        watcher = bucket.watch()
        await watcher.__aenter__()
        await anext(aiter(watcher))
        stopping = asyncio.create_task(watcher.stop())
        await asyncio.sleep(0)  # it now waits for its heartbeat monitor to end
        stopping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(stopping, 5)
        await watcher.stop()


async def test_cancelling_a_task_that_stops_a_message_stream_cancels_it(
    js: jetstream.JetStream, bucket: Bucket
) -> None:
    await bucket.put("a", b"1")
    consumer = await js.create_consumer(
        bucket.stream, jetstream.ConsumerConfig(ack_policy="explicit", ack_wait=0.2)
    )
    seen = asyncio.Event()

    async def handler(message: jetstream.PullMessage) -> None:
        seen.set()
        await asyncio.sleep(30)  # a slow handler: stop() must cancel and wait for it

    for steps in range(20):  # the cancel lands at each await of stop() in turn
        seen.clear()
        stream = await consumer.consume(handler)
        await asyncio.wait_for(seen.wait(), 5)
        stopping = asyncio.create_task(stream.stop())
        for _ in range(steps):
            await asyncio.sleep(0)
        if stopping.done():  # stop() took fewer steps: every await has been tried
            await stream.stop()
            break
        stopping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(stopping, 5)
        await stream.stop()


# -- close while calls are in flight ---------------------------------------------------------


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


# -- a cancel that lands with the reply ------------------------------------------------------


async def test_a_cancel_that_arrives_with_the_reply_is_not_lost(bucket: Bucket) -> None:
    """Python 3.11's ``asyncio.wait_for`` (inside nats-py's request and ``next_msg``) returns a
    reply that arrived in the same loop step as a cancel and drops the cancel: a watch
    cancelled while creating its consumer then went on waiting for entries forever."""
    await bucket.put("a", b"1")
    calls = [
        lambda: bucket.get("a"),
        lambda: bucket.get_many(["a"]),
        lambda: bucket.put("b", b"2"),
    ]
    swallowed = 0
    for call in calls:
        for steps in range(60):
            task = asyncio.create_task(call())
            for _ in range(steps):
                await asyncio.sleep(0)
            if task.done():
                await task
                break  # every step of the call has been tried
            task.cancel()
            try:
                await task
                swallowed += 1
            except asyncio.CancelledError:
                pass
    assert swallowed == 0


async def test_a_watch_cancelled_while_starting_leaves_no_consumer(
    js: jetstream.JetStream, bucket: Bucket
) -> None:
    """Before: the consumer stayed on the server for its 5-minute inactive threshold (one per
    cancel), since ``async with`` never reaches ``__aexit__`` when ``__aenter__`` is cancelled."""
    await bucket.put("a", b"1")
    for steps in range(80):
        watcher = bucket.watch()
        starting = asyncio.create_task(watcher.__aenter__())
        for _ in range(steps):
            await asyncio.sleep(0)
        if starting.done():
            await starting
            await watcher.stop()
            break  # every step of the start has been tried
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
    assert [name async for name in js.consumer_names(bucket.stream)] == []
