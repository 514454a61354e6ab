"""A holder killed with -9 frees the lock once its TTL runs out; a holder paused past its TTL
loses it to the next, and its fenced write is then refused by the server."""

from __future__ import annotations

import os
import signal
import time

import pytest

import jetstream
from tests.conftest import BucketFactory
from tests.kvstore import lock_process

TTL = lock_process.TTL
TAKEOVER_BOUND = 3.0
"""Seconds beyond the TTL within which a waiter takes over from a killed holder (measured on
loopback with a 3 s TTL, which runs from the holder's last renewal: with markers 2.0 to 3.0 s
after the kill, the marker's delivery and the create adding milliseconds; without, by polling
every TTL / 4, 2.0 to 3.8 s)."""


@pytest.mark.parametrize(
    "markers",
    [True, pytest.param(False, marks=pytest.mark.locks_long)],
    ids=["markers", "polling"],
)
async def test_a_waiter_takes_over_from_a_killed_holder_within_ttl_and_a_bound(
    nats_server: jetstream.EmbeddedServer, make_bucket: BucketFactory, markers: bool
) -> None:
    bucket = await (make_bucket(history=5, marker_ttl="1s") if markers else make_bucket())
    holder = await lock_process.start(nats_server.url, bucket.name, "jobs.nightly", "hold")
    try:
        held = await lock_process.said(holder)
        assert held.startswith("held ")
        holder.kill()
        await holder.wait()
        killed = time.monotonic()
        async with bucket.lock("jobs.nightly", ttl=TTL, timeout=TTL + TAKEOVER_BOUND) as lease:
            took = time.monotonic() - killed
            assert lease.token > int(held.split()[1])
    finally:
        if holder.returncode is None:
            holder.kill()
            await holder.wait()
    print(f"took over {took:.2f}s after the kill (TTL {TTL}s)")


@pytest.mark.parametrize(
    "trial", [0, *(pytest.param(n, marks=pytest.mark.locks_long) for n in range(1, 6))]
)
async def test_a_paused_holders_fenced_write_is_refused_after_another_took_the_lock(
    nats_server: jetstream.EmbeddedServer, make_bucket: BucketFactory, trial: int
) -> None:
    bucket = (
        await make_bucket(history=5, marker_ttl="1s") if trial % 2 == 0 else await make_bucket()
    )
    holder = await lock_process.start(nats_server.url, bucket.name, "jobs.nightly", "hold")
    try:
        assert (await lock_process.said(holder)).startswith("held ")
        lock_process.tell(holder, "write first")
        assert (await lock_process.said(holder)).startswith("stored ")
        os.kill(holder.pid, signal.SIGSTOP)
        try:
            async with bucket.lock("jobs.nightly", ttl=TTL, timeout=TTL + TAKEOVER_BOUND) as lease:
                await bucket.put("data", b"second", fence=lease)
                os.kill(holder.pid, signal.SIGCONT)
                lock_process.tell(holder, "write stale")
                assert await lock_process.said(holder) == "lost held=False"
                assert lease.held
        finally:
            os.kill(holder.pid, signal.SIGCONT)
        assert (await bucket.get("data")).value == b"second"
    finally:
        holder.kill()
        await holder.wait()
