"""kill -9 the server in the middle of an upload: the upload fails with UploadFailedError, no
meta record exists after a restart, and cleanup() removes every chunk it left."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

import jetstream
import objstore

CHUNK = objstore.DEFAULT_CHUNK_SIZE


async def test_server_killed_mid_upload(tmp_path: Path) -> None:
    server = jetstream.EmbeddedServer(store_dir=tmp_path / "store")
    server.start()
    try:
        async with await jetstream.connect(
            server.url, timeout=2.0, reconnect_time_wait=0.2, max_reconnect_attempts=-1
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
                async for m in jetstream.scan_stream(
                    js, store.stream, ["$O.crash.C.>"], last_per_subject=False
                )
            ]
            previous = await store.info("previous")
            assert {m.subject for m in chunks} == {f"$O.crash.C.{previous.nuid}"}, "no orphans"
            assert await store.get_bytes("previous") == b"kept"
    finally:
        server.close()


async def _until_ready(js: jetstream.JetStream) -> None:
    for _ in range(100):
        try:
            await js.stream_info("OBJ_crash")
            return
        except (jetstream.NoRespondersError, jetstream.RequestTimeoutError, jetstream.ServerError):
            await asyncio.sleep(0.1)
    raise AssertionError("server did not come back")
