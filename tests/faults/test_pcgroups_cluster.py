"""Consumer-group members on a 3-node cluster ride out kill -9 of the leader of the group's
work-queue stream and of a member's consumer leader, each node restarted afterwards: every
message is processed, each key's messages in order (``max_ack_pending=1``), never two
members on one key at once, only typed errors reach the handler, and the members keep going."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable

import pytest

import jetstream
import pcgroups
from jetstream import ConsumerConfig, StreamConfig
from jetstream.testing import EmbeddedCluster
from pcgroups import PartitioningFilter

from .conftest import kill_leader, restart, until

pytestmark = pytest.mark.faults
KEYS = 50
MESSAGES = 1500
ACK_WAIT = 2.0


class Work:
    """What the members did: per key the numbers in processing order, overlaps, errors."""

    def __init__(self) -> None:
        self.order: dict[str, list[int]] = defaultdict(list)
        self.active: dict[str, str] = {}
        self.overlaps: list[str] = []
        self.errors: list[BaseException] = []
        self.times: list[float] = []  # when each processing ended

    def handler(self, member: str) -> Callable[[pcgroups.GroupMessage], Awaitable[None]]:
        async def handle(msg: pcgroups.GroupMessage) -> None:
            key, n = msg.data.decode().split(":")
            if key in self.active:
                self.overlaps.append(f"{key}: {self.active[key]} and {member}")
            self.active[key] = member
            await asyncio.sleep(0.005)
            self.order[key].append(int(n))
            self.times.append(time.monotonic())
            del self.active[key]
            try:
                await msg.ack()
            except Exception as exc:  # a lost ack is redelivered; it must be a typed error
                self.errors.append(exc)

        return handle

    def processed(self) -> set[tuple[str, int]]:
        return {(key, n) for key, numbers in self.order.items() for n in numbers}


async def publish(js: jetstream.JetStream, count: int) -> None:
    """``PC.<key>`` carrying ``<key>:<n>``, 50 at a time, idempotent (msg id)."""

    async def one(i: int) -> None:
        key, n = f"k{i % KEYS}", i // KEYS
        await js.publish(f"PC.{key}", f"{key}:{n}".encode(), msg_id=f"{key}:{n}")

    for first in range(0, count, 50):
        await asyncio.gather(*(one(i) for i in range(first, min(first + 50, count))))


async def consumer_leader(cluster: EmbeddedCluster, js: jetstream.JetStream) -> int:
    """The node leading member m1's consumer (waits through an election)."""
    deadline = time.monotonic() + 30
    while True:
        with contextlib.suppress(Exception):  # no answer during an election: ask again
            reply = await js.nc.request("$JS.API.CONSUMER.INFO.PC-g.m1", b"", timeout=2)
            leader = json.loads(reply.data).get("cluster", {}).get("leader")
            for i, node in enumerate(cluster.nodes):
                if node.running and f"n{i}" == leader:
                    return i
        assert time.monotonic() < deadline, "m1's consumer has no leader"
        await asyncio.sleep(0.1)


async def test_members_ride_out_leader_kills(cluster: EmbeddedCluster) -> None:
    async with contextlib.AsyncExitStack() as stack:
        js = await stack.enter_async_context(await cluster.connect(timeout=5.0))
        await js.add_stream(StreamConfig(name="PC", subjects=["PC.*"], num_replicas=3))
        await pcgroups.create_elastic(
            js, "PC", "g", max_members=4, filters=[PartitioningFilter("PC.*", (1,))]
        )
        await pcgroups.add_members(js, "PC", "g", ["m1", "m2"])
        work = Work()
        strict = ConsumerConfig(ack_wait=ACK_WAIT, max_ack_pending=1)  # type: ignore[arg-type]
        endings: list[asyncio.Task[None]] = []
        for name in ("m1", "m2"):
            conn = await stack.enter_async_context(await cluster.connect(timeout=5.0))
            member = pcgroups.consume_elastic(
                conn, "PC", "g", name, work.handler(name), config=strict
            )
            await stack.enter_async_context(member)
            endings.append(asyncio.create_task(member.done()))
        # everything is in the work queue before the kills: what is measured is the members
        # (2.15.1 was seen to pause sourcing into the work queue for 20-46 s after a kill)
        await publish(js, MESSAGES)
        await until(lambda: len(work.processed()) >= 1, "members consume")
        left_at_kill: list[int] = []
        for step, leader_of in enumerate(("stream", "consumer"), 1):
            await until(
                lambda: len(work.processed()) >= step * MESSAGES // 3,  # noqa: B023
                f"progress before kill {step}",
            )
            if leader_of == "stream":
                node = await kill_leader(cluster, js, "PC-g")
            else:
                node = await consumer_leader(cluster, js)
                await asyncio.to_thread(cluster.nodes[node].kill)
            left_at_kill.append(MESSAGES - len(work.processed()))
            await asyncio.sleep(1.0)  # consuming goes on (or waits for the election) meanwhile
            await restart(cluster, node)
        everything = {(f"k{i % KEYS}", i // KEYS) for i in range(MESSAGES)}
        await until(lambda: work.processed() == everything, "every message", within=60)
        assert not any(task.done() for task in endings), "a member ended"
    await asyncio.gather(*endings)  # stopped by leaving the context: no error
    assert not work.overlaps
    for key, numbers in work.order.items():
        assert numbers == sorted(numbers), f"{key} out of order: {numbers}"
    assert all(isinstance(e, jetstream.JetStreamError) for e in work.errors), work.errors
    duplicates = sum(len(n) for n in work.order.values()) - len(everything)
    stall = max(b - a for a, b in itertools.pairwise(work.times))
    print(
        f"cluster: {MESSAGES} messages, {left_at_kill} left at the kills, "
        f"{duplicates} processed twice, longest stall {stall:.2f}s"
    )
    assert min(left_at_kill) >= 100, "the kills came mid-flow"
    # members wait for the election, their consumer (deleted meanwhile by its
    # inactive_threshold, recreated) and the one unacked message's ack_wait
    assert stall < 30
