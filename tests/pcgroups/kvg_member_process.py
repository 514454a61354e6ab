"""A watch-group member in its own process, for the test that kills it with SIGKILL: it
processes changes of ``BUCKET`` as ``MEMBER`` of ``GROUP`` and prints ``start <key> <revision>
<op> <delivered> <monotonic>`` before and ``end <key> <revision> <op> <delivered> <monotonic>``
after handling a change (then acks it), and ``ready`` once it has joined.
``time.monotonic()`` is one clock for every process on Linux, so the parent can check that no
two members ever worked on one key at once.

Usage: python kvg_member_process.py URL BUCKET GROUP MEMBER ACK_WAIT
"""

from __future__ import annotations

import asyncio
import sys
import time

import jetstream
import kvstore
import pcgroups


async def main(url: str, bucket_name: str, group: str, member: str, ack_wait: float) -> None:
    async def handle(change: pcgroups.KeyChange) -> None:
        what = f"{change.key} {change.revision} {change.op.name} {change.delivered}"
        print(f"start {what} {time.monotonic():.6f}", flush=True)
        await asyncio.sleep(0.002)
        print(f"end {what} {time.monotonic():.6f}", flush=True)
        await change.ack()

    config = jetstream.ConsumerConfig(ack_wait=ack_wait)
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.open_bucket(js, bucket_name)
        async with pcgroups.watch_group(bucket, group, member, handle, config=config) as watch:
            print("ready", flush=True)
            await watch.done()


if __name__ == "__main__":
    url, bucket_name, group, member, ack_wait = sys.argv[1:6]
    asyncio.run(main(url, bucket_name, group, member, float(ack_wait)))
