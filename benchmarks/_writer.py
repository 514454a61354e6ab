"""A writer process for the watch benchmark: prints "ready", waits for "go" on stdin, writes
the updates in batches of 1000 (``put_many``, or plain puts sent together), prints "done". A
separate process, so the writer and the watcher under test do not share an event loop (as in
perf.md's baseline)."""

from __future__ import annotations

import asyncio
import sys

import nats

import jetstream
import kvstore

from .kv_watch import write


async def main(url: str, bucket_name: str, updates: int, kind: str) -> None:
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.open_bucket(js, bucket_name)
        peer = await nats.connect(url)
        try:
            loop = asyncio.get_running_loop()
            print("ready", flush=True)  # connected: what it costs from here is the writing
            while True:
                line = await loop.run_in_executor(None, sys.stdin.readline)
                if line.strip() != "go":
                    return
                for start in range(0, updates, 1000):
                    numbers = range(start, min(start + 1000, updates))
                    await write(bucket, peer, kind, numbers, b"u" * 100)
                print("done", flush=True)
        finally:
            await peer.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
