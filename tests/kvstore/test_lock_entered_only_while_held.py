"""A lock's block is entered only with its lease held: a create the server answered too late
to count on (the server stalled past most of the TTL) is given back and tried again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import jetstream
import kvstore


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[jetstream.EmbeddedServer]:
    with jetstream.EmbeddedServer(store_dir=tmp_path / "store") as running:
        yield running


async def test_a_create_answered_after_the_ttl_is_not_entered_as_held(
    server: jetstream.EmbeddedServer,
) -> None:
    async with await jetstream.connect(server.url, timeout=10.0) as js:
        bucket = await kvstore.create_bucket(js, "locks", history=5, marker_ttl="1s")
        entered: list[bool] = []

        async def take() -> None:
            async with bucket.lock("jobs.nightly", ttl=3, timeout=30) as lease:
                entered.append(lease.held)

        await asyncio.to_thread(server.pause)
        taking = asyncio.ensure_future(take())
        await asyncio.sleep(0)  # its create is sent (to a server that does not read it)
        await asyncio.sleep(3.5)  # the stall: longer than the lease's TTL
        await asyncio.to_thread(server.resume)
        await taking
        assert entered == [True]
