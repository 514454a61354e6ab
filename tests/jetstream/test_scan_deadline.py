"""Scans end in bounded time on a server that stops answering; watches wait it out.

A scan (an ordered consumer with ``until_caught_up``: ``keys()``, ``history()``, object
listings, Spark reads) used to recreate its consumer forever against a paused server, so a
listing or a Spark task never ended. A watch whose read timed out while the server was paused
goes on once it is back, and a scan rides out a restart that ends within the retry deadline."""

from __future__ import annotations

import asyncio

import pytest

import jetstream
import kvstore


async def test_a_scan_on_a_paused_server_raises_request_timeout_in_bounded_time() -> None:
    async with (
        jetstream.EmbeddedServer() as server,
        await jetstream.connect(server.url, timeout=0.5, retry_deadline=1.0) as js,
    ):
        bucket = await kvstore.create_bucket(js, "scanned")
        await bucket.put("a", b"1")
        server.pause()
        try:
            async with asyncio.timeout(30):  # a hang fails here, not in CI's time limit
                with pytest.raises(jetstream.RequestTimeoutError, match="reset_deadline"):
                    _ = [key async for key in bucket.keys()]
                with pytest.raises(jetstream.RequestTimeoutError, match="reset_deadline"):
                    _ = [entry async for entry in bucket.history("a")]
        finally:
            server.resume()
        assert [key async for key in bucket.keys()] == ["a"]  # the next scan works


async def test_a_follower_waits_out_a_paused_server_past_the_retry_deadline() -> None:
    """What a watch runs on: a consumer that follows new messages keeps recreating itself
    while the server is silent, well past ``retry_deadline``, and goes on after it."""
    async with (
        jetstream.EmbeddedServer() as server,
        await jetstream.connect(server.url, timeout=0.5, retry_deadline=1.0) as js,
    ):
        bucket = await kvstore.create_bucket(js, "watched")
        await bucket.put("a", b"1")
        async with jetstream.OrderedConsumer(js, bucket.stream, heartbeat=0.5) as follower:
            assert (await anext(follower)).data == b"1"
            server.pause()
            try:
                with pytest.raises(TimeoutError):  # silent, not failed: it keeps trying
                    async with asyncio.timeout(5):
                        await anext(follower)
            finally:
                server.resume()
            await bucket.put("a", b"2")
            async with asyncio.timeout(30):
                message = await anext(follower)
            assert message.data == b"2"
            assert follower.resets >= 1


@pytest.mark.parametrize("deadline", [0, -1.0, True, "5", float("nan")])
async def test_a_bad_reset_deadline_is_refused(js: jetstream.JetStream, deadline: object) -> None:
    with pytest.raises(jetstream.ClientValidationError):
        jetstream.OrderedConsumer(js, "ANY", reset_deadline=deadline)  # type: ignore[arg-type]


@pytest.mark.parametrize("wait", [0.3, 2.0])
async def test_a_watch_whose_first_read_timed_out_on_a_paused_server_goes_on(wait: float) -> None:
    """asyncio.timeout around the first anext() of a watch while the server is paused: once
    it is back, the next anext() must deliver, not end the watch silently."""
    async with (
        jetstream.EmbeddedServer() as server,
        await jetstream.connect(server.url, timeout=0.5, retry_deadline=1.0) as js,
    ):
        bucket = await kvstore.create_bucket(js, "firstread")
        await bucket.put("a", b"1")
        watcher = bucket.watch()
        server.pause()
        try:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(wait):
                    await anext(watcher)
        finally:
            server.resume()
        try:
            async with asyncio.timeout(30):
                entry = await anext(watcher)  # StopAsyncIteration: the watch ended silently
            assert entry.key == "a" and entry.value == b"1"
        finally:
            await watcher.stop()


@pytest.mark.parametrize("gap", [1.0, 6.0])
async def test_a_scan_survives_a_server_restart_within_the_retry_deadline(gap: float) -> None:
    async with (
        jetstream.EmbeddedServer() as server,
        await jetstream.connect(server.url, timeout=1.0, retry_deadline=20.0) as js,
    ):
        bucket = await kvstore.create_bucket(js, "restarted")
        await bucket.put_many({f"k{i:05d}": b"v" for i in range(1000)})
        await bucket.put_many({f"k{i:05d}": b"v" for i in range(1000, 2000)})
        keys = []
        async with asyncio.timeout(60):
            async for key in bucket.keys():
                keys.append(key)
                if len(keys) == 1:
                    server.kill()
                    await asyncio.sleep(gap)
                    await asyncio.to_thread(server.start)
        assert len(keys) == 2000 and len(set(keys)) == 2000
