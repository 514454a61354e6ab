"""A writer process for the watch benchmark: waits for "go" on stdin, writes the updates with
put_many in batches of 1000, prints "done". A separate process, so the writer and the watcher
under test do not share an event loop (as in perf.md's baseline)."""

from __future__ import annotations

import asyncio
import sys

import jetstream
import kvstore


async def main(url: str, bucket_name: str, updates: int) -> None:
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.open_bucket(js, bucket_name)
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if line.strip() != "go":
                return
            for start in range(0, updates, 1000):
                end = min(start + 1000, updates)
                await bucket.put_many({f"k{i}": b"u" * 100 for i in range(start, end)})
            print("done", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
