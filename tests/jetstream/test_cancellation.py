"""A cancel is never lost: one landing while a watch or a message stream stops its puller, or in
the same loop step as the reply it waited for, cancels the call; and a watch cancelled while it
starts leaves no consumer on the server."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

import jetstream
from kvstore import Bucket


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
