"""Hardening of KV writes and server limits: refused CAS cost, message and control-line
limits, get_many consistency. All on real servers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import nats
import pytest
from nats.aio.msg import Msg

import jetstream
import kvstore
from kvstore import Bucket

# -- finding 11: a refused CAS costs one round trip -------------------------------------------


@asynccontextmanager
async def api_requests(
    js: jetstream.JetStream, url: str
) -> AsyncIterator[Callable[[], Awaitable[list[str]]]]:
    """Record the JetStream API requests (subjects) ``js`` sends while the block runs.

    The returned function waits until a sentinel request sent after the block's work has
    been seen (messages of one connection arrive in order), then returns what was recorded.
    """
    seen: list[str] = []
    sentinel = f"{js.api.info()}"
    monitor = await nats.connect(url)
    done = asyncio.Event()

    async def record(msg: Msg) -> None:
        if msg.subject == sentinel:
            done.set()
        else:
            seen.append(msg.subject)

    await monitor.subscribe(f"{js.api.prefix}.>", cb=record)
    await monitor.flush()

    async def collected() -> list[str]:
        await js.account_info()  # the sentinel
        await asyncio.wait_for(done.wait(), 5)
        return seen

    try:
        yield collected
    finally:
        await monitor.close()


async def test_refused_update_makes_no_lookup(
    bucket: Bucket, js: jetstream.JetStream, nats_server: jetstream.EmbeddedServer
) -> None:
    revision = await bucket.put("counter", b"1")
    await bucket.put("counter", b"2")
    async with api_requests(js, nats_server.url) as collected:
        with pytest.raises(kvstore.WrongRevisionError) as wrong:
            await bucket.update("counter", b"3", revision)
        requests = await collected()
    assert wrong.value.current == revision + 1
    # The write itself goes to $KV..., not the API: a refused first attempt is definite, so
    # neither a stream lookup nor a message-id scan may follow (both were made before).
    assert requests == []


async def test_refused_publish_with_msg_id_makes_no_lookup(
    bucket: Bucket, js: jetstream.JetStream, nats_server: jetstream.EmbeddedServer
) -> None:
    await bucket.put("k", b"v")
    async with api_requests(js, nats_server.url) as collected:
        with pytest.raises(jetstream.WrongLastSequenceError):
            await js.publish(
                f"$KV.{bucket.name}.k",
                b"w",
                headers={jetstream.headers.EXPECTED_LAST_SUBJECT_SEQUENCE: "0"},
                msg_id="refused-once",
            )
        assert await collected() == []


async def test_refused_create_reads_the_key_once(
    bucket: Bucket, js: jetstream.JetStream, nats_server: jetstream.EmbeddedServer
) -> None:
    await bucket.put("lock", b"held")
    async with api_requests(js, nats_server.url) as collected:
        with pytest.raises(kvstore.KeyExistsError):
            await bucket.create("lock", b"mine")
        requests = await collected()
    # create must tell a live value from a tombstone: one direct get, nothing more.
    assert requests == [f"{js.api.prefix}.DIRECT.GET.{bucket.stream}.$KV.{bucket.name}.lock"]
