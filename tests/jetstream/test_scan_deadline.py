"""Scans end in bounded time on a server that stops answering; watches wait it out.

A scan (an ordered consumer with ``until_caught_up``: ``keys()``, ``history()``, object
listings, Spark reads) used to recreate its consumer forever against a paused server, so a
listing or a Spark task never ended (hostile review helper-44)."""

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
