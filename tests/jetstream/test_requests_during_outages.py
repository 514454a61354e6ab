"""Requests while the server is away: the error says how long was waited and what was retried, a
read outlasting one timeout is asked again until the retry deadline, ``stall_timeout`` bounds
opening an object, and frames published while reconnecting go through publish's checks."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import pytest

import jetstream
import kvstore
import objstore
from jetstream import StreamConfig

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("garbage_collected")]


async def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def test_a_request_during_an_outage_states_the_real_wait_and_the_retries(
    own_server: jetstream.EmbeddedServer, caplog: pytest.LogCaptureFixture
) -> None:
    async with await jetstream.connect(own_server.url, timeout=0.5, retry_deadline=2.0) as js:
        await js.add_stream(StreamConfig(name="OUT", subjects=["out.>"]))
        caplog.set_level(logging.DEBUG, logger="jetstream")
        own_server.pause()
        try:
            started = time.monotonic()
            with pytest.raises(jetstream.RequestTimeoutError) as timed_out:
                await js.stream_info("OUT")
            waited = time.monotonic() - started
        finally:
            own_server.resume()
        message = str(timed_out.value)
        # It said "no reply ... within 0.5s" after waiting 2.5 s.
        assert "STREAM.INFO.OUT" in message and "attempts: timeout x" in message, message
        stated = float(message.split("within ")[1].split("s ")[0])
        assert 2.0 <= stated <= waited
        retries = [r for r in caplog.records if "retrying" in r.getMessage()]
        assert retries and all(r.levelno == logging.DEBUG for r in retries)
        await js.delete_stream("OUT")


async def test_a_get_outlasting_one_timeout_is_asked_again_until_the_retry_deadline(
    own_server: jetstream.EmbeddedServer,
) -> None:
    """A direct get is a read, retried on timeout like every idempotent request. It was not:
    right after a leader was killed, one request routed to the dead replica's lingering
    interest failed ``bucket.get`` (CI, tests/faults ``test_ttl_expires_across_a_leader_kill``)."""
    async with await jetstream.connect(own_server.url, timeout=0.5, retry_deadline=10.0) as js:
        bucket = await kvstore.create_bucket(js, "getretry")
        await bucket.put("k", b"v")
        own_server.pause()
        try:
            getting = asyncio.ensure_future(bucket.get("k"))
            await asyncio.sleep(1.2)  # at least two timed-out attempts
            assert not getting.done()
        finally:
            own_server.resume()
        assert (await getting).value == b"v"
        await kvstore.delete_bucket(js, "getretry")


async def test_stall_timeout_bounds_opening_an_object_on_a_paused_server(
    own_server: jetstream.EmbeddedServer,
) -> None:
    """helper-39: the meta record read before the reader exists retried until the retry
    deadline (11 s here, about 25 s with the defaults), whatever stall_timeout said."""
    async with await jetstream.connect(own_server.url, timeout=1.0, retry_deadline=10.0) as js:
        store = await objstore.create_store(js, "stallopen")
        await store.put("obj", b"x" * 1000)
        own_server.pause()
        try:
            started = time.monotonic()
            with pytest.raises(jetstream.RequestTimeoutError, match="stall_timeout"):
                await store.get_bytes("obj", stall_timeout=2.0)
            assert time.monotonic() - started < 3.0
        finally:
            own_server.resume()
        await objstore.delete_store(js, "stallopen")


async def test_frames_while_reconnecting_take_publish_checks(
    own_server: jetstream.EmbeddedServer,
) -> None:
    """Pre-encoded frames bypassed nats-py's checks: while reconnecting they were queued past
    the reconnect buffer's limit without an error. Now they go through publish, and a full
    buffer is a DisconnectedError (a JetStreamError); a closed client a ConnectionClosedError."""
    from jetstream._transport.hpub import publish_frames

    frames = [("s.a", {"h": "v"}, b"x" * 1000) for _ in range(10)]
    js = await jetstream.connect(
        own_server.url, pending_size=4096, reconnect_time_wait=0.05, max_reconnect_attempts=-1
    )
    async with js:
        await publish_frames(js.nc, frames)  # connected: the fast path
        own_server.kill()
        await _until(lambda: js.nc.is_reconnecting)
        with pytest.raises(jetstream.DisconnectedError):
            await publish_frames(js.nc, frames)
    with pytest.raises(jetstream.ConnectionClosedError):
        await publish_frames(js.nc, frames)
