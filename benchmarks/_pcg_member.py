"""A group member process for the consumer-group benchmark: joins once "go" arrives on stdin,
handles messages (``work`` seconds of awaited work, then ack) until it has handled ``share``
of them, prints "done" and leaves. A separate process per member, as a group is deployed, so members
do not share one event loop.

Usage: python -m benchmarks._pcg_member URL STREAM GROUP MEMBER SHARE WORK_SECONDS
"""

from __future__ import annotations

import asyncio
import sys

import jetstream
import pcgroups


async def main(url: str, stream: str, group: str, member: str, share: int, work: float) -> None:
    handled = 0
    all_handled = asyncio.Event()

    async def handle(msg: pcgroups.GroupMessage) -> None:
        nonlocal handled
        await asyncio.sleep(work)
        await msg.ack()
        handled += 1
        if handled == share:
            all_handled.set()

    config = jetstream.ConsumerConfig(max_ack_pending=1)
    async with await jetstream.connect(url) as js:
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        async with pcgroups.consume_elastic(js, stream, group, member, handle, config=config):
            await all_handled.wait()
            print("done", flush=True)


if __name__ == "__main__":
    url, stream, group, member, share, work = sys.argv[1:7]
    asyncio.run(main(url, stream, group, member, int(share), float(work)))
