"""Conditional writes (create, update, a publish with a message id) cost what they must: a refusal
makes no extra lookup, a create on a contended key asks for the holder alongside the write, and
an update whose ack was lost is asked again and stored once."""

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
from tests.conftest import BucketFactory
from tests.proxy import TcpProxy


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


async def test_create_on_a_contended_key_asks_for_the_holder_alongside_the_write(
    bucket: Bucket, js: jetstream.JetStream, nats_server: jetstream.EmbeddedServer
) -> None:
    """A lock loop: after one refusal the key's last message is read together with the write,
    so later refusals cost one round trip; a released lock (tombstone) is still taken."""
    await bucket.put("lock", b"held")
    with pytest.raises(kvstore.KeyExistsError):
        await bucket.create("lock", b"mine")
    for _ in range(3):
        with pytest.raises(kvstore.KeyExistsError) as refused:
            await bucket.create("lock", b"mine")
        assert refused.value.revision == 1
    await bucket.delete("lock")
    revision = await bucket.create("lock", b"mine")  # over the tombstone
    assert (await bucket.get("lock")).revision == revision
    async with api_requests(js, nats_server.url) as collected:
        await bucket.create("fresh", b"v")  # never refused: no read at all
        requests = await collected()
    assert requests == []


async def test_an_update_whose_ack_was_lost_is_stored_once(
    nats_server: jetstream.EmbeddedServer, make_bucket: BucketFactory
) -> None:
    """The retried path still resolves: the first attempt's ack is dropped, the retry (same
    Nats-Msg-Id) learns that it was stored, and the update returns its revision."""
    bucket = await make_bucket(history=5)
    revision = await bucket.put("k", b"1")
    proxy = await TcpProxy(nats_server.port).start()
    try:
        async with await jetstream.connect(proxy.url, timeout=0.5) as proxied:
            lossy = await kvstore.open_bucket(proxied, bucket.name)

            def lose_the_ack(chunk: bytes) -> bool:
                if f"$KV.{bucket.name}.k".encode() in chunk:
                    if proxy.drop_to_client:
                        proxy.drop_to_client = False  # the retry: let its answer through
                        proxy.on_client_bytes = None
                    else:
                        proxy.drop_to_client = True  # stored, but its ack is lost
                return True

            proxy.on_client_bytes = lose_the_ack
            new = await lossy.update("k", b"2", revision)
    finally:
        await proxy.close()
    assert [e.revision async for e in bucket.history("k")] == [revision, new]
    assert (await bucket.get("k")).value == b"2"
