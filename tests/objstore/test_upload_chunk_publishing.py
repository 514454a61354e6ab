"""An upload publishes its chunks with fast ingest where the stream allows it and falls back to
acked publishes where it does not (stores other clients made, a stream that lost
``allow_batched``); either way a failed or cancelled upload leaves no chunk behind, and the
acked publisher keeps the chunks' order and its window."""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import AsyncIterator, Callable

import pytest
from nats.js import JetStreamContext

import jetstream
import objstore
from jetstream._consume.scan import scan_stream

SMALL = 64 * 1024  # many messages in flight when an upload fails


async def _chunk_subjects(js: jetstream.JetStream, store: objstore.ObjectStore) -> set[str]:
    return {
        m.subject
        async for m in scan_stream(
            js, store.stream, [f"$O.{store.name}.C.>"], headers_only=True, last_per_subject=False
        )
    }


async def _only_chunks_of(
    js: jetstream.JetStream, store: objstore.ObjectStore, keep: set[str] | None = None
) -> None:
    """Put one last object: it is stored after anything an earlier upload still had in flight
    (one connection, one stream), so afterwards the store must hold its chunks, those of the
    objects in ``keep``, and no others."""
    final = await store.put("final", b"f" * 3 * SMALL, chunk_size=SMALL)
    nuids = {final.nuid} | {(await store.info(name)).nuid for name in keep or ()}
    expected = {f"$O.{store.name}.C.{nuid}" for nuid in nuids}
    assert await _chunk_subjects(js, store) == expected, "orphans"


class _Boom(Exception):
    pass


async def _raising(fail_at: int) -> AsyncIterator[bytes]:
    for i in range(fail_at):
        yield bytes([i % 256]) * SMALL
    raise _Boom(f"source failed at chunk {fail_at}")


async def _failing_uploads(store: objstore.ObjectStore, trials: int, seed: int) -> None:
    rng = random.Random(seed)
    for trial in range(trials):
        with pytest.raises(objstore.UploadFailedError, match="source failed"):
            await store.put(f"obj{trial}", _raising(rng.randint(1, 150)), chunk_size=SMALL)


async def _cancelled_uploads(store: objstore.ObjectStore, trials: int, seed: int) -> None:
    rng = random.Random(seed)

    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b"c" * SMALL

    for trial in range(trials):
        task = asyncio.create_task(
            store.put(
                f"obj{trial}",
                endless(),
                chunk_size=SMALL,
                progress=_canceller(asyncio.current_task, rng.randint(1, 150) * SMALL),
            )
        )
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 30)
        assert task.cancelled(), "the cancellation propagated"


def _canceller(
    current: Callable[[], asyncio.Task[object] | None], after: int
) -> Callable[[int, int | None], None]:
    """A progress callback cancelling the upload's task once ``after`` bytes were sent."""

    def progress(done: int, total: int | None) -> None:
        task = current()
        if done >= after and task is not None:
            task.cancel()

    return progress


async def test_raising_source_leaves_no_chunks(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    store = await objstore.create_store(js, unique_name("orph"))
    await _failing_uploads(store, trials=15, seed=10)
    await _only_chunks_of(js, store)
    await objstore.delete_store(js, store.name)


async def test_cancelled_upload_leaves_no_chunks(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    store = await objstore.create_store(js, unique_name("canc"))
    await _cancelled_uploads(store, trials=15, seed=11)
    await _only_chunks_of(js, store)
    await objstore.delete_store(js, store.name)


async def test_put_into_a_nats_py_store_falls_back_to_acked_publishes(
    js: jetstream.JetStream,
    peer: JetStreamContext,
    unique_name: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    name = unique_name("peer")
    obs = await peer.create_object_store(name)
    store = await objstore.open_store(js, name)
    data = os.urandom(5 * objstore.DEFAULT_CHUNK_SIZE + 7)
    with caplog.at_level(logging.INFO, logger="objstore"):
        info = await store.put("ours", data, meta={"k": "v"})
        await store.put("ours-too", b"x" * 10)
    notes = [r for r in caplog.records if "allow_batched" in r.getMessage()]
    assert len(notes) == 1 and notes[0].levelno == logging.INFO, "one info line per store"
    assert info.chunks == 6
    result = await obs.get("ours")
    assert result.data == data, "nats-py reads (and digest-checks) the fallback upload"
    assert (await obs.get("ours-too")).data == b"x" * 10
    assert await store.get_bytes("ours") == data
    await peer.delete_object_store(name)


async def test_fallback_failed_and_cancelled_uploads_leave_no_chunks(
    js: jetstream.JetStream, peer: JetStreamContext, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("peerorph")
    await peer.create_object_store(name)
    store = await objstore.open_store(js, name)
    await _failing_uploads(store, trials=10, seed=12)
    await _cancelled_uploads(store, trials=10, seed=13)
    await _only_chunks_of(js, store)
    await peer.delete_object_store(name)


async def test_fast_ingest_is_kept_where_the_stream_allows_it(
    js: jetstream.JetStream, unique_name: Callable[[str], str], caplog: pytest.LogCaptureFixture
) -> None:
    store = await objstore.create_store(js, unique_name("fast"))
    with caplog.at_level(logging.INFO, logger="objstore"):
        await store.put("a", b"a" * 10)
    assert not [r for r in caplog.records if "allow_batched" in r.getMessage()]
    assert await store._core.fast_ingest() is True
    await objstore.delete_store(js, store.name)


async def test_a_stream_losing_allow_batched_names_it_and_the_next_put_falls_back(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    store = await objstore.create_store(js, unique_name("flip"))
    await store.put("before", b"b" * 10)  # fast ingest, the config is now cached
    info = await js.stream_info(store.stream)
    info.config.allow_batched = False
    await js.update_stream(info.config)
    with pytest.raises(objstore.UploadFailedError, match="allow_batched"):
        await store.put("during", b"d" * 10)
    await store.put("after", b"a" * 10)
    assert await store.get_bytes("after") == b"a" * 10
    await _only_chunks_of(js, store, keep={"before", "after"})
    await objstore.delete_store(js, store.name)


async def test_acked_publisher_keeps_order_and_its_window(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("AW")
    await js.add_stream(jetstream.StreamConfig(name=name, subjects=[f"{name}.>"]))
    async with jetstream.AckedPublisher(js, window=4) as pub:
        for i in range(300):
            await pub.add(f"{name}.x", str(i).encode())
            assert pub.unanswered <= 4
        ack = await pub.commit(f"{name}.x", b"last")
    assert ack.seq == 301 and ack.stream == name
    stored = [m.data async for m in scan_stream(js, name, [f"{name}.x"], last_per_subject=False)]
    assert stored == [str(i).encode() for i in range(300)] + [b"last"], "in order, once each"
    with pytest.raises(jetstream.NoRespondersError):
        async with jetstream.AckedPublisher(js) as pub:
            await pub.add(f"nostream_{name}.x", b"x")
            await pub.commit()
    with pytest.raises(jetstream.BatchClosedError):
        await pub.add(f"{name}.x", b"after")
    with pytest.raises(ValueError, match="window"):
        jetstream.AckedPublisher(js, window=0)
    await js.delete_stream(name)


async def test_nothing_an_abandoned_fast_batch_sent_is_stored_afterwards(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("FA")
    config = jetstream.StreamConfig(name=name, subjects=[f"{name}.>"], allow_batched=True)
    await js.add_stream(config)
    payload = b"p" * SMALL
    for trial in range(10):
        with pytest.raises(_Boom):
            async with jetstream.FastPublisher(js) as batch:
                for _ in range(20 + 20 * trial):
                    await batch.add(f"{name}.x", payload)
                raise _Boom
        settled = (await js.stream_info(name)).state.messages
        await js.publish(f"{name}.sync", b"s")  # stored after anything still in flight
        assert (await js.stream_info(name)).state.messages == settled + 1, f"trial {trial}"
        await js.purge_stream(name)
    await js.delete_stream(name)
