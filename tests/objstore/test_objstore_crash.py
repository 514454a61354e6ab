"""Uploads interrupted by the server: kill -9 mid-upload fails with UploadFailedError (no meta
after a restart, cleanup() removes every chunk it left); a lost meta-record ack is asked again,
and only an unanswerable one is CommitUnknownError, with the chunks kept."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path

import nats.errors
import pytest

import jetstream
import objstore
from jetstream._consume.scan import scan_stream
from tests.proxy import TcpProxy

CHUNK = objstore.DEFAULT_CHUNK_SIZE


async def test_server_killed_mid_upload(tmp_path: Path) -> None:
    server = jetstream.EmbeddedServer(store_dir=tmp_path / "store")
    server.start()
    try:
        async with await jetstream.connect(
            server.url,
            timeout=2.0,
            retry_deadline=4.0,
            reconnect_time_wait=0.2,
            max_reconnect_attempts=-1,
        ) as js:
            store = await objstore.create_store(js, "crash")
            await store.put("previous", b"kept")
            killed = asyncio.Event()

            async def source() -> AsyncIterator[bytes]:
                for i in range(400):
                    if i == 150:
                        await asyncio.to_thread(server.kill)
                        killed.set()
                    yield bytes([i % 256]) * CHUNK

            with pytest.raises(objstore.UploadFailedError):
                await store.put("big", source())
            assert killed.is_set()
            await asyncio.to_thread(server.start)
            await _until_ready(js)
            with pytest.raises(objstore.ObjectNotFoundError):
                await store.info("big")
            await store.cleanup(older_than=timedelta(0))
            chunks = [
                m
                async for m in scan_stream(
                    js, store.stream, ["$O.crash.C.>"], last_per_subject=False
                )
            ]
            previous = await store.info("previous")
            assert {m.subject for m in chunks} == {f"$O.crash.C.{previous.nuid}"}, "no orphans"
            assert await store.get_bytes("previous") == b"kept"
    finally:
        server.close()


async def test_server_dying_while_the_upload_waits_for_the_socket(tmp_path: Path) -> None:
    """The server stops reading (paused), the socket and nats-py's buffer fill up and the
    upload's publish waits for nats-py's flusher; then the server dies. The flusher stops
    there and nothing ended that wait: the upload hung until nats-py's 2-minute ping (seen
    in CI). It fails within its timeouts now."""
    server = jetstream.EmbeddedServer(store_dir=tmp_path / "store")
    server.start()
    try:
        async with await jetstream.connect(
            server.url, timeout=1.0, retry_deadline=2.0, reconnect_time_wait=0.2
        ) as js:
            store = await objstore.create_store(js, "crash")
            killing: list[asyncio.Task[None]] = []

            async def kill_soon() -> None:
                await asyncio.sleep(1.0)  # the publish is waiting for the socket by then
                await asyncio.to_thread(server.kill)

            async def source() -> AsyncIterator[bytes]:
                for i in range(400):
                    if i == 20:
                        await asyncio.to_thread(server.pause)
                        killing.append(asyncio.create_task(kill_soon()))
                    yield bytes([i % 256]) * CHUNK

            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(objstore.UploadFailedError):
                await asyncio.wait_for(store.put("big", source()), 60)
            assert loop.time() - started < 20, "failed within its timeouts, not a hang"
            await killing[0]
    finally:
        server.close()


@pytest.fixture
async def proxy(nats_server: jetstream.EmbeddedServer) -> AsyncIterator[TcpProxy]:
    proxy = await TcpProxy(nats_server.port).start()
    yield proxy
    await proxy.close()


def _lose_replies_once_sent(proxy: TcpProxy) -> objstore.Progress:
    """A progress callback: once every chunk is confirmed, the server's replies (the meta
    record's ack first) stop reaching the client."""

    def progress(done: int, total: int | None) -> None:
        if done == total:
            proxy.drop_to_client = True

    return progress


async def test_lost_meta_ack_is_asked_again(
    proxy: TcpProxy, js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("os")
    data = os.urandom(3 * CHUNK + 5)
    async with await jetstream.connect(proxy.url, timeout=0.5, retry_deadline=20) as proxied:
        store = await objstore.create_store(proxied, name)
        loop = asyncio.get_running_loop()
        healing = loop.call_later(1.2, setattr, proxy, "drop_to_client", False)
        info = await store.put("obj", data, progress=_lose_replies_once_sent(proxy))
        healing.cancel()
    mine = await objstore.open_store(js, name)
    assert (await mine.info("obj")).nuid == info.nuid
    assert await mine.get_bytes("obj") == data
    metas = [m async for m in scan_stream(js, mine.stream, [f"$O.{name}.M.>"])]
    assert len(metas) == 1, "the repeat was answered as a duplicate, not stored twice"
    await objstore.delete_store(js, name)


async def test_unanswered_meta_ack_is_commit_unknown_and_keeps_the_chunks(
    proxy: TcpProxy, js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("os")
    data = os.urandom(2 * CHUNK)
    async with await jetstream.connect(proxy.url, timeout=0.5, retry_deadline=1.5) as proxied:
        store = await objstore.create_store(proxied, name)
        with pytest.raises(jetstream.CommitUnknownError) as unknown:
            await store.put("obj", data, progress=_lose_replies_once_sent(proxy))
        proxy.drop_to_client = False  # lets the connection close cleanly
    mine = await objstore.open_store(js, name)
    stored = await mine.info("obj")  # the meta record did arrive: only its ack was lost
    assert unknown.value.msg_ids == [stored.nuid]
    assert await mine.get_bytes("obj") == data, "its chunks were kept"
    await objstore.delete_store(js, name)


async def _until_ready(js: jetstream.JetStream) -> None:
    for _ in range(100):
        try:
            await js.stream_info("OBJ_crash")
            return
        except (jetstream.NoRespondersError, jetstream.RequestTimeoutError, jetstream.ServerError):
            await asyncio.sleep(0.1)
    raise AssertionError("server did not come back")


async def test_a_publish_waiting_out_flush_timeout_is_not_logged_as_a_warning(
    nats_server: jetstream.EmbeddedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """connect() bounds nats-py's wait for its full buffer (the fix above); on a slow but
    healthy link the wait can run out while nothing is wrong (the buffer is written later,
    in order), so that is logged at debug level, not as a connection warning."""
    caplog.set_level(logging.DEBUG, logger="jetstream")
    async with await jetstream.connect(nats_server.url, timeout=0.5) as js:
        await js.nc._error_cb(nats.errors.FlushTimeoutError())  # what nats-py reports then
        await js.nc._error_cb(nats.errors.StaleConnectionError())  # a real problem: a warning
    logged = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "jetstream"]
    assert (logging.DEBUG, "nats connection: FlushTimeoutError: nats: flush timeout") in logged
    assert [m for level, m in logged if level == logging.WARNING] == [
        "nats connection: StaleConnectionError: nats: stale connection"
    ]
