"""A context, and every bucket, store and consumer made from it, belongs to the event loop its
connection runs in. Used from another loop (``run_sync`` from a notebook, a thread's
own ``asyncio.run``) a request could only wait out its timeout and retries, 20 s, and end in
RequestTimeoutError: it is refused at once with WrongEventLoopError saying why."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable

import nats
import pytest

import jetstream
import kvstore
from jetstream._options import run_sync
from tests.conftest import BucketFactory, StoreFactory


async def _first_key(bucket: kvstore.Bucket) -> object:
    async with bucket.watch() as watcher:
        return await anext(watcher)


async def test_a_handle_used_from_another_event_loop_is_refused_at_once(
    js: jetstream.JetStream, make_bucket: BucketFactory, make_store: StoreFactory
) -> None:
    bucket = await make_bucket()
    store = await make_store()
    await bucket.put("k", b"v")
    await store.put("o", b"object")
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: bucket.put("k", b"v"),
        lambda: bucket.get("k"),
        lambda: bucket.put_many({"a": b"1", "b": b"2"}),
        lambda: bucket.get_many(["k"]),
        lambda: _first_key(bucket),
        lambda: store.get_bytes("o"),
        lambda: store.put("p", b"object"),
        js.account_info,
    ]
    for call in calls:
        with pytest.raises(jetstream.WrongEventLoopError, match="another event loop"):
            run_sync(call)
    assert issubclass(jetstream.WrongEventLoopError, RuntimeError)
    # Nothing was written, and nothing broke in the loop the handles belong to.
    assert (await bucket.get("k")).value == b"v"
    assert await store.get_bytes("o") == b"object"
    assert [key async for key in bucket.keys()] == ["k"]  # put_many wrote nothing
    assert [info.name async for info in store.list()] == ["o"]


async def test_a_watch_or_listing_read_from_another_event_loop_is_refused_at_once(
    make_bucket: BucketFactory, make_store: StoreFactory
) -> None:
    """Started in the context's loop, then read from another one: waiting for the next entry
    (or ending a listing that is done, which stops its consumer's tasks) waited forever,
    blocking both loops."""
    bucket = await make_bucket()
    store = await make_store()
    await bucket.put("k", b"v")
    await store.put("o", b"object")
    async with bucket.watch() as watcher:
        assert (await anext(watcher)).key == "k"
        with pytest.raises(jetstream.WrongEventLoopError):
            run_sync(lambda: anext(watcher))
        await bucket.put("k", b"again")
        assert (await anext(watcher)).value == b"again"  # still works in its own loop
    keys = bucket.keys()
    assert await anext(keys) == "k"
    with pytest.raises(jetstream.WrongEventLoopError):
        run_sync(lambda: anext(keys))
    await keys.aclose()  # type: ignore[attr-defined]
    objects = store.watch()
    assert (await anext(objects)).name == "o"
    with pytest.raises(jetstream.WrongEventLoopError):
        run_sync(lambda: anext(objects))
    await objects.aclose()  # type: ignore[attr-defined]


async def test_a_context_made_outside_any_loop_belongs_to_the_first_that_uses_it(
    nats_server: jetstream.EmbeddedServer,
) -> None:
    nc = await nats.connect(nats_server.url)
    made: list[jetstream.JetStream] = []
    thread = threading.Thread(target=lambda: made.append(jetstream.JetStream(nc)))
    thread.start()
    thread.join()
    js = made[0]
    try:
        assert (await js.account_info()).api.level > 0
        with pytest.raises(jetstream.WrongEventLoopError):
            run_sync(js.account_info)
    finally:
        await nc.close()
