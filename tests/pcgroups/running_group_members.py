"""Members of every kind of group, running: a static group on ``S``, an elastic group on
``E`` and a watch group on bucket ``B`` (all ``g``, member ``m1``), with a handler and
iterated, and a member of the elastic group ``h`` on ``E`` whose handler never returns.

As a program, one that returns from its main coroutine while its members still run and its
connection is still open: ``asyncio.run`` then cancels every task at once, the members' and
the connection's own alike. It prints ``consuming`` once the members receive, and returns
when a line arrives on stdin.

Usage: python running_group_members.py URL TIMEOUT
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import jetstream
import kvstore
import pcgroups
from pcgroups import PartitioningFilter

PER_STREAM = 30


async def create_groups(js: jetstream.JetStream) -> kvstore.Bucket:
    """The three groups, and messages (changes) for each."""
    await js.add_stream(
        jetstream.StreamConfig(
            name="S",
            subjects=["S.*"],
            subject_transform={"src": "S.*", "dest": "{{partition(2,1)}}.S.{{wildcard(1)}}"},
        )
    )
    await pcgroups.create_static(js, "S", "g", max_members=2, members=["m1"])
    await js.add_stream(jetstream.StreamConfig(name="E", subjects=["E.*"]))
    await pcgroups.create_elastic(
        js, "E", "g", max_members=2, filters=[PartitioningFilter("E.*", [1])]
    )
    await pcgroups.add_members(js, "E", "g", ["m1"])
    await pcgroups.create_elastic(
        js, "E", "h", max_members=1, filters=[PartitioningFilter("E.*", [1])]
    )
    await pcgroups.add_members(js, "E", "h", ["m1"])
    bucket = await kvstore.create_bucket(js, "B")
    await pcgroups.create_bucket_group(bucket, "g", max_members=2, members=["m1"])
    for i in range(PER_STREAM):
        await js.publish(f"S.k{i}", b"s")
        await js.publish(f"E.k{i}", b"e")
        await bucket.put(f"k{i}", b"b")
    return bucket


async def _handled(member: pcgroups.GroupMember | pcgroups.BucketGroupWatch) -> None:
    async with member:
        await member.done()


async def _iterated(member: Any, received: asyncio.Event) -> None:
    async with member:
        async for item in member:
            received.set()
            await item.ack()


def _stuck(received: asyncio.Event) -> Callable[[Any], Any]:
    async def handle(item: Any) -> None:
        received.set()
        await asyncio.Event().wait()  # until cancelled

    return handle


def _acking(received: asyncio.Event) -> Callable[[Any], Any]:
    async def handle(item: Any) -> None:
        received.set()
        await item.ack()

    return handle


async def start_members(
    js: jetstream.JetStream, bucket: kvstore.Bucket
) -> list[asyncio.Task[None]]:
    """Tasks running a member each (static with a handler, elastic iterated and with a handler
    that never returns, watch group with a handler and iterated), once all of them have
    received something."""
    static, elastic, watch, stuck = (asyncio.Event() for _ in range(4))
    template = jetstream.ConsumerConfig(ack_wait=2.0)
    patient = jetstream.ConsumerConfig(ack_wait=30.0)  # a stop would wait that long for it
    owners = [
        _handled(pcgroups.consume_static(js, "S", "g", "m1", _acking(static), config=template)),
        _iterated(pcgroups.consume_elastic(js, "E", "g", "m1", config=template), elastic),
        _handled(pcgroups.consume_elastic(js, "E", "h", "m1", _stuck(stuck), config=patient)),
        # two instances of one member: the pinned one receives, the other waits
        _handled(pcgroups.watch_group(bucket, "g", "m1", _acking(watch), config=template)),
        _iterated(pcgroups.watch_group(bucket, "g", "m1", config=template), watch),
    ]  # fmt: skip
    tasks = [asyncio.create_task(owner) for owner in owners]
    await asyncio.wait_for(
        asyncio.gather(static.wait(), elastic.wait(), watch.wait(), stuck.wait()), 30
    )
    return tasks


async def main(url: str, timeout: float) -> None:
    js = await jetstream.connect(url, timeout=timeout)
    bucket = await create_groups(js)
    await start_members(js, bucket)
    print("consuming", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    # returns without stopping the members or closing the connection


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
