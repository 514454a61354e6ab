"""Object store: upload a file over fast-ingest batches, stream it back with its digest
checked, link to it, and let a temporary object expire.

Runs against $NATS_URL when set, otherwise starts an embedded nats-server.

    python examples/objects.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import jetstream
import objstore


@contextlib.asynccontextmanager
async def nats_url() -> AsyncIterator[str]:
    if url := os.environ.get("NATS_URL"):
        print(f"using the NATS server at {url} (from NATS_URL)")
        yield url
        return
    async with jetstream.EmbeddedServer() as server:
        print(f"using an embedded nats-server at {server.url} (pid {server.pid})")
        yield server.url


async def main() -> None:
    folder = Path(tempfile.mkdtemp())
    model = folder / "model.bin"
    model.write_bytes(os.urandom(3 * 1024 * 1024))  # a 3 MiB "model"

    async with nats_url() as url, await jetstream.connect(url) as js:
        store = await objstore.create_store(js, "examples")
        try:
            info = await store.put(
                "model.bin",
                model,  # a path, bytes, a binary file or an (async) iterable of bytes
                meta={"version": "1"},
                progress=lambda done, total: None,  # e.g. drive a progress bar
            )
            print(f"stored {info.name}: {info.size} bytes in {info.chunks} chunks, {info.digest}")

            await store.add_link("latest", "model.bin")  # reads of "latest" follow the link
            async with store.open("latest") as reader:  # bounded memory, digest checked at the end
                received = sum([len(chunk) async for chunk in reader])
            print(f"streamed {received} bytes back through the link")

            await store.put("scratch.txt", b"temporary", ttl=1)  # gone as a whole after 1 s
            await asyncio.sleep(1.5)
            try:
                await store.info("scratch.txt")
            except objstore.ObjectNotFoundError:
                print("scratch.txt expired")

            print("objects:", sorted([i.name async for i in store.list()]))
        finally:
            await objstore.delete_store(js, "examples")


if __name__ == "__main__":
    asyncio.run(main())
