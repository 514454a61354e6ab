"""A group member in its own process, for tests that kill it: consumes as ``member`` of the
elastic group and prints ``got <n> <delivered> <time>`` when a message arrives and
``ready`` once it has joined.

Usage: python pcg_member_process.py URL STREAM GROUP MEMBER ACK_WAIT
"""

from __future__ import annotations

import asyncio
import sys
import time

import jetstream
import pcgroups


async def main(url: str, stream: str, group: str, member: str, ack_wait: float) -> None:
    async def handle(msg: pcgroups.GroupMessage) -> None:
        n = msg.data.decode().split(":")[1]
        print(f"got {n} {msg.raw.metadata.delivered} {time.time():.6f}", flush=True)
        await asyncio.sleep(0.005)
        await msg.ack()

    config = jetstream.ConsumerConfig(ack_wait=ack_wait, max_ack_pending=1)
    async with (
        await jetstream.connect(url) as js,
        pcgroups.consume_elastic(js, stream, group, member, handle, config=config) as running,
    ):
        print("ready", flush=True)
        await running.done()


if __name__ == "__main__":
    url, stream, group, member, ack_wait = sys.argv[1:6]
    asyncio.run(main(url, stream, group, member, float(ack_wait)))
