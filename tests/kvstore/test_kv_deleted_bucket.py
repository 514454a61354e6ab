"""A handle to a bucket that someone deleted: every operation fails at once with
BucketNotFoundError naming the bucket (not NoRespondersError on the publish or direct-get
subject, not a bare StreamNotFoundError), whoever deleted it; a watch or a listing running
at that moment ends with it too, also when a bucket of the same name was created meanwhile;
a bucket created again under the name is used by the handle's one-shot operations."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import msgspec
import pytest
from nats.js import JetStreamContext

import jetstream
import kvstore
from jetstream import Keyring
from tests.conftest import BucketFactory
from tests.proxy import TcpProxy

RING = Keyring({"k1": bytes(range(32))}, primary="k1")


class Profile(msgspec.Struct):
    name: str


async def _watch_one(bucket: kvstore.Bucket) -> object:
    async with bucket.watch() as watcher:
        return await anext(watcher)


async def _batch(bucket: kvstore.Bucket) -> object:
    async with bucket.batch() as batch:
        batch.put("a", b"1")
        batch.delete("k")
    return batch.revisions


async def _typed_watch_one(bucket: kvstore.Bucket) -> object:
    async with bucket.typed(Profile).watch() as watcher:
        return await anext(watcher)


async def _all(items: Any) -> list[object]:
    return [item async for item in items]


OPERATIONS: dict[str, Callable[[kvstore.Bucket], Awaitable[object]]] = {
    "put": lambda b: b.put("k", b"v"),
    "put with ttl": lambda b: b.put("k", b"v", ttl=60),
    "create": lambda b: b.create("new", b"v"),
    "update": lambda b: b.update("k", b"v", revision=1),
    "delete": lambda b: b.delete("k"),
    "delete at revision": lambda b: b.delete("k", revision=1),
    "purge": lambda b: b.purge("k"),
    "get": lambda b: b.get("k"),
    "get at revision": lambda b: b.get("k", revision=1),
    "get_many": lambda b: b.get_many(["k", "other"]),
    "put_many": lambda b: b.put_many({"a": b"1", "b": b"2"}),
    "put_many expecting": lambda b: b.put_many({"k": b"1", "new": b"2"}, expect={"k": 1, "new": 0}),
    "batch": _batch,
    "prepared batch": lambda b: b.prepare_many({"a": b"1"}).commit(),
    "keys": lambda b: _all(b.keys()),
    "history": lambda b: _all(b.history("k")),
    "watch": _watch_one,
    "status": lambda b: b.status(),
    "purge_deletes": lambda b: b.purge_deletes(older_than=None),
    "rekey": lambda b: b.rekey(),
    "typed put": lambda b: b.typed(Profile).put("t", Profile("x")),
    "typed get": lambda b: b.typed(Profile).get("t"),
    "typed get_many": lambda b: b.typed(Profile).get_many(["t"]),
    "typed keys": lambda b: _all(b.typed(Profile).keys()),
    "typed history": lambda b: _all(b.typed(Profile).history("t")),
    "typed watch": _typed_watch_one,
}


Deleter = Callable[[str], Awaitable[None]]


@pytest.fixture(params=["by us", "by a peer"])
def delete(
    request: pytest.FixtureRequest, js: jetstream.JetStream, peer: JetStreamContext
) -> Deleter:
    """Deletes a bucket: through kvstore, or through nats-py as another client."""
    if request.param == "by us":
        return lambda name: kvstore.delete_bucket(js, name)

    async def by_peer(name: str) -> None:
        assert await peer.delete_key_value(name)

    return by_peer


@pytest.mark.parametrize(
    ("operation", "encrypted"),
    [
        pytest.param(name, encrypted, id=f"{name}-{'encrypted' if encrypted else 'plain'}")
        for name in OPERATIONS
        for encrypted in (False, True)
        if encrypted or name != "rekey"  # rekey needs an encrypted bucket
    ],
)
async def test_every_operation_on_a_deleted_bucket_raises_bucket_not_found(
    make_bucket: BucketFactory, delete: Deleter, operation: str, encrypted: bool
) -> None:
    options: dict[str, Any] = {"encryption": RING} if encrypted else {}
    bucket = await make_bucket(history=5, marker_ttl=timedelta(seconds=1), **options)
    await bucket.put("k", b"v")
    await bucket.typed(Profile).put("t", Profile("x"))
    await delete(bucket.name)
    with pytest.raises(kvstore.BucketNotFoundError) as raised:
        await OPERATIONS[operation](bucket)
    assert raised.value.bucket == bucket.name
    assert repr(bucket.name) in str(raised.value)
    assert raised.value.err_code == 10059


async def test_a_running_watch_ends_with_bucket_not_found_when_the_bucket_is_deleted(
    make_bucket: BucketFactory, delete: Deleter
) -> None:
    bucket = await make_bucket()
    await bucket.put("k", b"v")
    async with bucket.watch() as watcher:
        assert (await anext(watcher)).key == "k"
        await delete(bucket.name)
        with pytest.raises(kvstore.BucketNotFoundError, match=bucket.name):
            await anext(watcher)


async def test_a_listing_under_way_ends_with_bucket_not_found_when_the_bucket_is_deleted(
    make_bucket: BucketFactory, delete: Deleter
) -> None:
    """keys() reads through a consumer, 500 keys at a time: the bucket deleted after the
    first ends it with the bucket's error, not a bare StreamNotFoundError."""
    bucket = await make_bucket()
    for first in (0, 1000):
        await bucket.put_many({f"k{i}": b"x" for i in range(first, first + 1000)})
    keys = bucket.keys()
    assert await anext(keys) == "k0"
    await delete(bucket.name)
    with pytest.raises(kvstore.BucketNotFoundError, match=bucket.name):
        async for _ in keys:
            pass


async def test_a_handle_uses_a_bucket_created_again_under_its_name(
    make_bucket: BucketFactory, js: jetstream.JetStream, peer: JetStreamContext
) -> None:
    """The handle names a bucket: deleted and created again (here by a peer), the new bucket
    is read and written, with the configuration the handle was opened with."""
    bucket = await make_bucket()
    await bucket.put("k", b"old")
    assert await peer.delete_key_value(bucket.name)
    with pytest.raises(kvstore.BucketNotFoundError):
        await bucket.get("k")
    await kvstore.create_bucket(js, bucket.name)
    with pytest.raises(kvstore.KeyNotFoundError):
        await bucket.get("k")
    assert await bucket.put("k", b"new") == 1
    assert (await bucket.get("k")).value == b"new"
    assert [key async for key in bucket.keys()] == ["k"]


async def test_a_watch_does_not_go_on_in_a_bucket_created_again_while_it_was_away(
    nats_server: jetstream.EmbeddedServer, peer: JetStreamContext, unique_name: Callable[[str], str]
) -> None:
    """Deleted and created again while the watch's connection was cut, the bucket's revisions
    start over: the watch resumed after its last revision in the new bucket, skipping the new
    bucket's first changes. It ends with BucketNotFoundError instead."""
    proxy = await TcpProxy(nats_server.port).start()
    name = unique_name("kv")
    try:
        async with await jetstream.connect(proxy.url) as js:
            bucket = await kvstore.create_bucket(js, name)
            for i in range(3):
                await bucket.put(f"old{i}", b"v")
            async with bucket.watch() as watcher:
                assert [(await anext(watcher)).key for _ in range(3)] == ["old0", "old1", "old2"]
                proxy.drop_to_client = proxy.drop_to_server = True  # the watch hears nothing
                assert await peer.delete_key_value(name)
                again = await peer.create_key_value(bucket=name)
                for i in range(5):
                    await again.put(f"new{i}", b"v")
                proxy.drop_to_client = proxy.drop_to_server = False
                proxy.cut()  # reconnects: the watch recreates its consumer
                with pytest.raises(kvstore.BucketNotFoundError, match=name) as raised:
                    await anext(watcher)
                assert "created again" in str(raised.value.__cause__)
    finally:
        await proxy.close()
        await peer.delete_key_value(name)


@pytest.mark.parametrize("written_again", [3, 3000])
async def test_a_listing_does_not_go_on_in_a_bucket_created_again_while_it_was_away(
    nats_server: jetstream.EmbeddedServer,
    js: jetstream.JetStream,
    peer: JetStreamContext,
    unique_name: Callable[[str], str],
    written_again: int,
) -> None:
    """keys() reads 500 keys at a time; the bucket deleted and created again while its
    connection was cut, it resumed in the new bucket after the old one's position and ended
    quietly, a partial listing mixing two buckets. With more keys in the new bucket than the
    listing had read of the old one, no sequence gives it away: the new stream's creation
    after the listing's first consumer does. It ends with BucketNotFoundError."""
    proxy = await TcpProxy(nats_server.port).start()
    name = unique_name("kv")
    try:
        async with await jetstream.connect(proxy.url) as proxied:
            bucket = await kvstore.create_bucket(proxied, name)
            for first in (0, 1000):
                await bucket.put_many({f"old{i:04}": b"v" for i in range(first, first + 1000)})
            keys = bucket.keys()
            assert await anext(keys) == "old0000"
            proxy.drop_to_client = proxy.drop_to_server = True
            assert await peer.delete_key_value(name)
            again = await kvstore.create_bucket(js, name)
            for first in range(0, written_again, 1000):
                count = min(1000, written_again - first)
                await again.put_many({f"new{i}": b"v" for i in range(first, first + count)})
            proxy.drop_to_client = proxy.drop_to_server = False
            proxy.cut()
            with pytest.raises(kvstore.BucketNotFoundError, match=name):
                async for key in keys:
                    assert key.startswith("old")
    finally:
        await proxy.close()
        await peer.delete_key_value(name)


async def test_a_put_many_in_doubt_when_the_bucket_is_deleted_ends_at_once(
    nats_server: jetstream.EmbeddedServer,
    js: jetstream.JetStream,
    unique_name: Callable[[str], str],
) -> None:
    """The commit's reply lost, the bucket deleted before the resend: there is nothing left to
    resolve, yet the batch waited out its whole deadline (30 s by default) before it gave up
    with CommitUnknownError."""
    proxy = await TcpProxy(nats_server.port).start()
    name = unique_name("kv")
    commit_sent, resent = asyncio.Event(), asyncio.Event()

    def lose_the_commit_reply(chunk: bytes) -> bool:
        if commit_sent.is_set():
            resent.set()  # the first resend, after a timeout: the reply is long lost
            return False
        if b"Nats-Batch-Commit" in chunk:
            proxy.drop_to_client = True  # the commit reaches the server, its reply does not
            commit_sent.set()
        return True

    try:
        async with await jetstream.connect(proxy.url, timeout=0.5) as proxied:
            bucket = await kvstore.create_bucket(proxied, name)
            proxy.on_client_bytes = lose_the_commit_reply
            writing = asyncio.create_task(bucket.put_many({"a": b"1"}, deadline=600))
            await commit_sent.wait()
            await kvstore.delete_bucket(js, name)
            await resent.wait()
            proxy.on_client_bytes = None
            proxy.drop_to_client = False
            async with asyncio.timeout(60):  # not the 600 s deadline
                with pytest.raises(kvstore.BucketNotFoundError, match=name):
                    await writing
    finally:
        await proxy.close()


async def test_a_503_on_a_bucket_that_exists_stays_no_responders(
    make_bucket: BucketFactory, js: jetstream.JetStream
) -> None:
    """A 503 becomes BucketNotFoundError only once the server says the stream is gone: a
    direct get on a bucket whose stream lost ``allow_direct`` (nobody answers, as during an
    election) is still NoRespondersError, while the deleted bucket's is BucketNotFoundError."""
    bucket = await make_bucket()
    await bucket.put("k", b"v")
    info = await js.stream_info(bucket.stream)
    await js.update_stream(msgspec.structs.replace(info.config, allow_direct=False))
    with pytest.raises(jetstream.NoRespondersError) as raised:
        await bucket.get("k")
    assert not isinstance(raised.value, jetstream.StreamNotFoundError)
    await kvstore.delete_bucket(js, bucket.name)
    with pytest.raises(kvstore.BucketNotFoundError):
        await bucket.get("k")


async def test_concurrent_operations_on_a_deleted_bucket_all_raise_bucket_not_found(
    make_bucket: BucketFactory, delete: Deleter
) -> None:
    bucket = await make_bucket(history=5)
    await bucket.put("k", b"v")
    await delete(bucket.name)
    results = await asyncio.gather(
        *(OPERATIONS[name](bucket) for name in OPERATIONS if name != "rekey" for _ in range(3)),
        return_exceptions=True,
    )
    assert all(isinstance(r, kvstore.BucketNotFoundError) for r in results), results


async def test_a_batch_to_a_deleted_bucket_fails_at_once_not_after_its_deadline(
    make_bucket: BucketFactory, js: jetstream.JetStream
) -> None:
    """A put to a deleted bucket fails at once (BucketNotFoundError: no stream listens); a
    put_many or a prepared batch waited out its whole commit deadline (30 s by default),
    taking the 503 for a leader election."""
    bucket = await make_bucket()
    prepared = bucket.prepare_many({"a": b"1", "b": b"2"})
    await kvstore.delete_bucket(js, bucket.name)
    async with asyncio.timeout(10):
        with pytest.raises(kvstore.BucketNotFoundError):
            await bucket.put("a", b"1")
        with pytest.raises(kvstore.BucketNotFoundError):
            await bucket.put_many({"a": b"1", "b": b"2"})
        with pytest.raises(kvstore.BucketNotFoundError):
            await prepared.commit()
