"""Object put and get vs nats-py's object store, put vs the no-ack ceiling (core publish of the
same chunks into the same stream, until stored), put into a store made by nats-py (no
``allow_batched``: the acked-publish fallback), and get vs the transport ceiling (an ordered
consumer reading the object's chunks, no hashing, nothing written). Rates in MiB/s."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import nats
from nats.js.object_store import ObjectStore as PeerStore

import jetstream
import objstore
from objstore._download import window_messages

from ._harness import Scenario

STORE = "bench_objects"
PEER_STORE = "bench_objects_peer"
"""A store nats-py made: its stream has no ``allow_batched``, so our uploads take the fallback."""
MIB = 1024 * 1024


@dataclass
class Stores:
    js: jetstream.JetStream
    store: objstore.ObjectStore
    """Made by us: fast ingest."""
    peer: PeerStore
    """nats-py's view of ``store``."""
    fallback: objstore.ObjectStore
    """Made by nats-py: no ``allow_batched``, acked publishes."""


@asynccontextmanager
async def stores(url: str, replicas: int = 1) -> AsyncIterator[Stores]:
    async with await jetstream.connect(url) as js:
        store = await objstore.create_store(js, STORE, replicas=replicas)
        peer = await nats.connect(url)
        try:
            await peer.jetstream().create_object_store(PEER_STORE)
            fallback = await objstore.open_store(js, PEER_STORE)
            yield Stores(js, store, await peer.jetstream().object_store(STORE), fallback)
        finally:
            await peer.close()
            await objstore.delete_store(js, STORE)
            with contextlib.suppress(jetstream.JetStreamError):
                await objstore.delete_store(js, PEER_STORE)


def put_scenario(stores: Stores, mib: int) -> Scenario:
    js, store, peer, fallback = stores.js, stores.store, stores.peer, stores.fallback
    data = os.urandom(mib * MIB)

    async def ours() -> None:
        await store.put("put-ours", data)

    async def ours_fallback() -> None:
        await fallback.put("put-fallback", data)

    async def theirs() -> None:
        await peer.put("put-theirs", data)

    async def ceiling() -> None:
        await publish_until_stored(js, store, data)

    async def after() -> None:
        await js.purge_stream(store.stream)
        await js.purge_stream(fallback.stream)

    return Scenario(
        f"put {mib} MiB",
        mib,
        {
            "objstore put (fast ingest, SHA-256, meta)": ours,
            "objstore put, store without allow_batched (acked fallback)": ours_fallback,
            "nats-py obs.put": theirs,
            "core publish until stored (no-ack ceiling)": ceiling,
        },
        baseline="objstore put (fast ingest, SHA-256, meta)",
        after=after,
        unit="MiB",
    )


async def get_scenario(stores: Stores, mib: int) -> Scenario:
    js, store, peer = stores.js, stores.store, stores.peer
    info = await store.put(f"get-{mib}", os.urandom(mib * MIB))
    folder = Path(tempfile.mkdtemp(prefix="bench-get-"))

    async def ours() -> None:
        await store.get_file(f"get-{mib}", folder / "ours.bin")

    async def ours_streamed() -> None:
        async with store.open(f"get-{mib}") as reader:
            async for _ in reader:
                pass

    async def ceiling() -> None:
        """The object's chunks through the ordered consumer ``open()`` uses (same window), no
        hashing, no digest check, no file: what the transport delivers."""
        async for _ in _chunks(js, store, info):
            pass

    async def ceiling_to_file() -> None:
        """As ``ceiling``, written to a file in 4 MiB batches (one in flight) and fsynced, as
        ``get_file`` does, no hashing: the ceiling for ``get_file``."""
        loop = asyncio.get_running_loop()
        with open(folder / "ceiling.bin", "wb", buffering=0) as file:  # noqa: ASYNC230
            batch: list[bytes] = []
            writing: asyncio.Future[None] | None = None
            async for chunk in _chunks(js, store, info):
                batch.append(chunk)
                if len(batch) * objstore.DEFAULT_CHUNK_SIZE >= 4 * MIB:
                    if writing is not None:
                        await writing
                    writing = loop.run_in_executor(None, _write_synced, file, batch, False)
                    batch = []
            if writing is not None:
                await writing
            await loop.run_in_executor(None, _write_synced, file, batch, True)

    async def theirs() -> None:
        with open(folder / "theirs.bin", "wb") as file:  # noqa: ASYNC230 (as nats-py users do)
            await peer.get(f"get-{mib}", writeinto=file)

    return Scenario(
        f"get {mib} MiB",
        mib,
        {
            "objstore get_file (digest checked)": ours,
            "objstore open() chunks, no file (digest checked)": ours_streamed,
            "nats-py obs.get(writeinto=file)": theirs,
            "ordered consumer, chunks only (no hashing; transport ceiling)": ceiling,
            "ordered consumer into a file + fsync (no hashing; get_file ceiling)": ceiling_to_file,
        },
        baseline="objstore get_file (digest checked)",
        unit="MiB",
    )


async def publish_until_stored(
    js: jetstream.JetStream, store: objstore.ObjectStore, data: bytes
) -> None:
    """The upload ceiling: core publish of every chunk of ``data`` (no replies) into the
    store's stream, then wait until the stream has them all."""
    chunk = objstore.DEFAULT_CHUNK_SIZE
    before = (await js.stream_info(store.stream)).state.last_seq
    view = memoryview(data)
    for start in range(0, len(data), chunk):
        await js.nc.publish(f"$O.{STORE}.C.ceiling", bytes(view[start : start + chunk]))
    target = before + -(-len(data) // chunk)
    while (await js.stream_info(store.stream)).state.last_seq < target:
        await asyncio.sleep(0.001)


async def _chunks(
    js: jetstream.JetStream, store: objstore.ObjectStore, info: objstore.ObjectInfo
) -> AsyncIterator[bytes]:
    """An object's chunks through an ordered consumer with ``open()``'s window, unchecked."""
    consumer = jetstream.OrderedConsumer(
        js,
        store.stream,
        filter_subjects=[f"$O.{STORE}.C.{info.nuid}"],
        max_messages=window_messages(info),
    )
    async with consumer:
        received = 0
        async for message in consumer:
            yield message.data
            received += 1
            if received == info.chunks:
                break


def _write_synced(file: BinaryIO, pieces: list[bytes], sync: bool) -> None:
    for piece in pieces:
        file.write(piece)
    if sync:
        os.fsync(file.fileno())
