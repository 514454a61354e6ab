"""Group members consuming on a real server: 3 members of a static and of an elastic group
share 2,000 messages over 50 keys with every message processed, each key's messages in order
and never two members working on one key at once (a journal of start/end per key); a member
dropped mid-flow hands its partitions over without losing or overlapping anything; a
cancelled instance is replaced by another instance of the same member (pinned failover);
a deleted group or an incompatible config change ends members with typed errors."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import os
import pathlib
import random
import sys
import time
from collections.abc import AsyncIterator, Callable

import pytest

import jetstream
import kvstore
import pcgroups
from pcgroups import PartitioningFilter
from tests.pcgroups.group_streams import group_stream

pytestmark = pytest.mark.integration
KEYS = 50
MESSAGES = 2000
ACK_WAIT = 2.0  # seconds: short, so retries and takeovers are quick in tests
DEADLINE = 60.0


@dataclasses.dataclass
class Journal:
    """What every member did: per key, (n, member, start, end) in start order."""

    entries: dict[str, list[tuple[int, str, float, float]]] = dataclasses.field(
        default_factory=dict
    )
    active: dict[str, str] = dataclasses.field(default_factory=dict)
    overlaps: list[str] = dataclasses.field(default_factory=list)

    def handler(self, member: str, delay: float = 0.001) -> Callable[..., object]:
        async def handle(msg: pcgroups.GroupMessage) -> None:
            key, n = msg.data.decode().split(":")
            if key in self.active:  # another member is still working on this key
                self.overlaps.append(f"{key}: {self.active[key]} and {member}")
            self.active[key] = member
            start = time.monotonic()
            await asyncio.sleep(random.uniform(0, delay))
            del self.active[key]
            self.entries.setdefault(key, []).append((int(n), member, start, time.monotonic()))
            await msg.ack()

        return handle

    def processed(self) -> set[tuple[str, int]]:
        return {(key, n) for key, items in self.entries.items() for n, *_ in items}

    def check(self, total: int) -> None:
        assert not self.overlaps
        assert self.processed() == {(f"k{i % KEYS}", i // KEYS) for i in range(total)}
        for key, items in self.entries.items():
            numbers = [n for n, *_ in items]
            first_seen = list(dict.fromkeys(numbers))
            assert first_seen == sorted(first_seen), f"{key} out of order: {numbers}"
            for (_, _, _, end), (_, _, start, _) in itertools.pairwise(items):
                assert start >= end, f"{key}: overlapping processing"


async def publish(js: jetstream.JetStream, stream: str, start: int, stop: int) -> None:
    for i in range(start, stop):
        key = f"k{i % KEYS}"
        await js.publish(f"{stream}.{key}", f"{key}:{i // KEYS}".encode())


async def wait_for(condition: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


@pytest.fixture
async def conns(nats_server: jetstream.EmbeddedServer) -> AsyncIterator[list[jetstream.JetStream]]:
    """Three more connections: one per member, as separate clients."""
    async with contextlib.AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(await jetstream.connect(nats_server.url))
            for _ in range(3)
        ]


@pytest.fixture
async def static_stream(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> AsyncIterator[str]:
    """``<s>.<key>`` stored as ``<p>.<s>.<key>`` over 3 partitions (orbit's static setup)."""
    async with group_stream(js, unique_name("pcs"), partitions=3) as name:
        yield name


@pytest.fixture
async def source(js: jetstream.JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    async with group_stream(js, unique_name("pce")) as name:
        yield name


def template() -> jetstream.ConsumerConfig:
    return jetstream.ConsumerConfig(ack_wait=ACK_WAIT)


async def create_elastic(js: jetstream.JetStream, stream: str, members: list[str]) -> None:
    await pcgroups.create_elastic(
        js, stream, "g", max_members=6, filters=[PartitioningFilter(f"{stream}.*", [1])]
    )
    await pcgroups.add_members(js, stream, "g", members)


async def test_static_members_share_the_stream_in_order(
    js: jetstream.JetStream, conns: list[jetstream.JetStream], static_stream: str
) -> None:
    names = ["m1", "m2", "m3"]
    await pcgroups.create_static(js, static_stream, "g", max_members=3, members=names)
    journal = Journal()

    async def iterate(member: pcgroups.GroupMember) -> None:
        handle = journal.handler(member.member)
        async for msg in member:
            await handle(msg)  # type: ignore[misc]

    async with contextlib.AsyncExitStack() as stack:
        for conn, name in zip(conns, names, strict=True):
            handler = None if name == "m3" else journal.handler(name)  # m3 iterates
            member = pcgroups.consume_static(
                conn, static_stream, "g", name, handler, config=template()
            )
            await stack.enter_async_context(member)
            if handler is None:
                reader = asyncio.create_task(iterate(member))
        await publish(js, static_stream, 0, MESSAGES)
        await wait_for(lambda: len(journal.processed()) == MESSAGES, "all messages")
    await reader  # the iterator ended when the member stopped
    journal.check(MESSAGES)
    # each member consumed only its own partitions: every key went to exactly one member
    owners = {key: {m for _, m, _, _ in items} for key, items in journal.entries.items()}
    assert all(len(members) == 1 for members in owners.values())
    assert {m for members in owners.values() for m in members} == set(names)


async def test_elastic_members_share_the_stream_and_survive_a_drop(
    js: jetstream.JetStream, conns: list[jetstream.JetStream], source: str
) -> None:
    names = ["m1", "m2", "m3"]
    await create_elastic(js, source, names)
    journal = Journal()
    async with contextlib.AsyncExitStack() as stack:
        members = []
        for conn, name in zip(conns, names, strict=True):
            member = pcgroups.consume_elastic(
                conn, source, "g", name, journal.handler(name, delay=0.004), config=template()
            )
            members.append(await stack.enter_async_context(member))
        # Half before the drop, half while and after it: m3's keys have messages on both
        # sides of it, whatever the machine's pace, so the drop moves them between members.
        await publish(js, source, 0, MESSAGES // 2)
        await wait_for(lambda: len(journal.processed()) >= MESSAGES // 4, "a quarter")
        await wait_for(
            lambda: any(m == "m3" for items in journal.entries.values() for _, m, _, _ in items),
            "m3 at work",
        )
        publishing = asyncio.create_task(publish(js, source, MESSAGES // 2, MESSAGES))
        await pcgroups.delete_members(js, source, "g", ["m3"])
        await wait_for(lambda: members[2].partitions == (), "m3 dropped")
        dropped_at = time.monotonic()
        await publishing
        await wait_for(lambda: len(journal.processed()) == MESSAGES, "all messages")
        # m3 left: its consumer is gone and it processed nothing after the drop
        await wait_for(
            lambda: (
                "m3"
                not in {
                    m
                    for items in journal.entries.values()
                    for _, m, s, _ in items
                    if s > dropped_at + ACK_WAIT
                }
            ),
            "m3 idle",
        )
        names_now = {
            n async for n in js.consumer_names(pcgroups.wire.elastic_stream_name(source, "g"))
        }
        assert "m3" not in names_now
    journal.check(MESSAGES)
    moved = [k for k, items in journal.entries.items() if len({m for _, m, _, _ in items}) > 1]
    assert moved  # the drop moved keys between members mid-flow
    # the work queue is empty: everything was acknowledged
    info = await js.stream_info(pcgroups.wire.elastic_stream_name(source, "g"))
    assert info.state.messages == 0


async def test_a_new_instance_takes_over_a_cancelled_one(
    js: jetstream.JetStream, conns: list[jetstream.JetStream], source: str
) -> None:
    await create_elastic(js, source, ["m1"])
    received: list[tuple[str, int, float]] = []  # (instance, n, when)

    def handler(instance: str) -> Callable[[pcgroups.GroupMessage], object]:
        async def handle(msg: pcgroups.GroupMessage) -> None:
            received.append((instance, int(msg.data.decode().split(":")[1]), time.monotonic()))
            await asyncio.sleep(0.02)  # slower than the burst below: a holds a backlog
            await msg.ack()

        return handle

    # one message outstanding at a time: what a leaves unacked comes back before anything
    # newer, so the key's order holds across the takeover
    strict = jetstream.ConsumerConfig(ack_wait=ACK_WAIT, max_ack_pending=1)

    async def run(conn: jetstream.JetStream, instance: str) -> None:
        async with pcgroups.consume_elastic(
            conn, source, "g", "m1", handler(instance), config=strict
        ) as member:
            await member.done()

    first = asyncio.create_task(run(conns[0], "a"))
    total = 0

    async def produce(count: int, pause: float = 0.01) -> None:
        nonlocal total
        for _ in range(count):
            await js.publish(f"{source}.k0", f"k0:{total}".encode())
            total += 1
            await asyncio.sleep(pause)

    await produce(20)
    await wait_for(lambda: len(received) == 20, "a receives", timeout=10)
    second = asyncio.create_task(run(conns[1], "b"))
    await produce(40, pause=0)  # a burst: a has received more than it has handled
    await wait_for(lambda: len(received) >= 25, "a works on the burst")
    assert {i for i, _, _ in received} == {"a"}  # b waits while a holds the pin
    first.cancel()
    cancelled_at = time.monotonic()
    await asyncio.wait({first})
    producer = asyncio.create_task(produce(100))
    await wait_for(lambda: any(i == "b" for i, _, _ in received), "b takes over")
    takeover = min(t for i, _, t in received if i == "b") - cancelled_at
    await producer
    await wait_for(lambda: {n for _, n, _ in received} == set(range(total)), "everything")
    second.cancel()
    await asyncio.wait({second})
    print(f"takeover after {takeover:.3f}s")
    assert takeover < ACK_WAIT
    # order kept across the takeover (max_ack_pending=1)
    first_seen = list(dict.fromkeys(n for _, n, _ in received))
    assert first_seen == sorted(first_seen)


async def test_deleting_the_group_ends_members_with_a_typed_error(
    js: jetstream.JetStream, conns: list[jetstream.JetStream], source: str, static_stream: str
) -> None:
    await create_elastic(js, source, ["m1"])
    await pcgroups.create_static(js, static_stream, "g", max_members=3, members=["m1"])
    async with (
        pcgroups.consume_elastic(conns[0], source, "g", "m1", config=template()) as elastic,
        pcgroups.consume_static(conns[1], static_stream, "g", "m1", config=template()) as static,
    ):
        await pcgroups.delete_elastic(js, source, "g")
        await pcgroups.delete_static(js, static_stream, "g")
        for member in (elastic, static):
            with pytest.raises(pcgroups.GroupDeletedError):
                await asyncio.wait_for(member.done(), DEADLINE)
            with pytest.raises(pcgroups.GroupDeletedError):  # the iterator ends with it too
                async for _ in member:
                    pass


async def test_an_incompatible_change_ends_members(
    js: jetstream.JetStream, conns: list[jetstream.JetStream], source: str
) -> None:
    await create_elastic(js, source, ["m1"])
    bucket = await kvstore.open_bucket(js, pcgroups.wire.ELASTIC_BUCKET)
    async with pcgroups.consume_elastic(conns[0], source, "g", "m1", config=template()) as member:
        config = await pcgroups.elastic_config(js, source, "g")
        raw = pcgroups.wire.encode_elastic_config(
            pcgroups.ElasticConfig(
                max_members=config.max_members + 1,
                partitioning_filters=config.partitioning_filters,
                members=config.members,
            )
        )
        await bucket.put(f"{source}.g", raw)
        with pytest.raises(pcgroups.GroupConfigChangedError):
            await asyncio.wait_for(member.done(), DEADLINE)


async def test_static_non_member_and_missing_group_are_refused(
    js: jetstream.JetStream, static_stream: str
) -> None:
    with pytest.raises(pcgroups.GroupNotFoundError):
        async with pcgroups.consume_static(js, static_stream, "nope", "m1"):
            pass
    await pcgroups.create_static(js, static_stream, "g", max_members=3, members=["m1"])
    with pytest.raises(pcgroups.MemberNotFoundError):
        async with pcgroups.consume_static(js, static_stream, "g", "m9"):
            pass
    with pytest.raises(pcgroups.InvalidGroupNameError):
        pcgroups.consume_static(js, static_stream, "g", "a.b")


async def test_a_member_is_started_once_and_iterated_only_once_started(
    js: jetstream.JetStream, static_stream: str
) -> None:
    """Iterating a member outside ``async with`` would wait for good (nothing hands it a
    message); starting it twice would run two supervisors on one member."""
    await pcgroups.create_static(js, static_stream, "g", max_members=3, members=["m1"])
    member = pcgroups.consume_static(js, static_stream, "g", "m1")
    with pytest.raises(jetstream.ClientValidationError, match="not started"):
        await asyncio.wait_for(anext(member), DEADLINE)
    async with member:
        with pytest.raises(jetstream.ClientValidationError, match="started before"):
            await member.start()


class MemberProcess:
    """A member instance in a child process (``pcg_member_process.py``), read line by line."""

    def __init__(self, proc: asyncio.subprocess.Process, name: str) -> None:
        self.proc = proc
        self.name = name
        self.got: list[tuple[int, int, float]] = []  # (n, delivered, wall time)
        self.ready = asyncio.Event()
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, url: str, stream: str, name: str) -> MemberProcess:
        script = pathlib.Path(__file__).with_name("pcg_member_process.py")
        root = script.parent.parent.parent
        env = {**os.environ, "PYTHONPATH": str(root)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            url,
            stream,
            "g",
            "m1",
            str(ACK_WAIT),
            stdout=asyncio.subprocess.PIPE,
            cwd=root,
            env=env,
        )
        return cls(proc, name)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            words = line.decode().split()
            if words[:1] == ["ready"]:
                self.ready.set()
            elif words[:1] == ["got"]:
                self.got.append((int(words[1]), int(words[2]), float(words[3])))

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()  # SIGKILL: no goodbye, the pin stays until it times out
        await self.proc.wait()
        await self.reader


async def test_kill_9_of_the_pinned_process_fails_over_to_another_instance(
    js: jetstream.JetStream, nats_server: jetstream.EmbeddedServer, source: str
) -> None:
    await create_elastic(js, source, ["m1"])
    a = await MemberProcess.start(nats_server.url, source, "a")
    b = None
    sent = 0
    try:
        await asyncio.wait_for(a.ready.wait(), DEADLINE)

        async def produce(count: int) -> None:
            nonlocal sent
            for _ in range(count):
                await js.publish(f"{source}.k0", f"k0:{sent}".encode())
                sent += 1
                await asyncio.sleep(0.01)

        await produce(20)
        await wait_for(lambda: len(a.got) >= 20, "a receives")
        b = await MemberProcess.start(nats_server.url, source, "b")
        await asyncio.wait_for(b.ready.wait(), DEADLINE)
        await produce(20)
        assert not b.got  # a holds the pin
        killed_at = time.time()
        await a.kill()
        producer = asyncio.create_task(produce(200))
        await wait_for(lambda: bool(b.got), "b takes over")
        takeover = b.got[0][2] - killed_at
        await producer
        everything = set(range(sent))
        await wait_for(lambda: {n for n, _, _ in a.got + b.got} >= everything, "everything")
        print(f"kill -9 takeover after {takeover:.3f}s")
        # the pin times out priority_timeout (= ack_wait) after a's last pull; b's next pull
        # (at most a pull expiry later) is pinned
        assert takeover < ACK_WAIT + 2 * max(ACK_WAIT / 2, 1.0)
        # only the one message a held unacked (max_ack_pending=1) comes again, first, and
        # it is not older than what a had handled
        redelivered = [n for n, delivered, _ in b.got if delivered > 1]
        assert len(redelivered) <= 1
        if redelivered:
            assert redelivered[0] == b.got[0][0] >= max(n for n, _, _ in a.got)
        b_order = [n for n, _, _ in b.got]
        assert b_order == sorted(b_order)
    finally:
        await a.kill()
        if b is not None:
            await b.kill()


async def test_a_stopping_member_hands_back_its_backlog_at_once(
    js: jetstream.JetStream, conns: list[jetstream.JetStream], source: str
) -> None:
    """What a stopping instance received but did not handle is nak'ed (confirmed) before it
    releases the pin: the next instance gets it at once, not ``ack_wait`` later."""
    await create_elastic(js, source, ["m1"])
    got: list[tuple[str, int, int, float]] = []  # (instance, n, delivered, when)

    def handler(instance: str) -> Callable[[pcgroups.GroupMessage], object]:
        async def handle(msg: pcgroups.GroupMessage) -> None:
            n = int(msg.data.decode().split(":")[1])
            got.append((instance, n, msg.raw.metadata.delivered, time.monotonic()))
            await asyncio.sleep(0.02)
            await msg.ack()

        return handle

    a = pcgroups.consume_elastic(conns[0], source, "g", "m1", handler("a"), config=template())
    b = pcgroups.consume_elastic(conns[1], source, "g", "m1", handler("b"), config=template())
    async with a:
        await js.publish(f"{source}.k0", b"k0:0")
        await wait_for(lambda: len(got) == 1, "a pinned")
        async with b:
            for n in range(1, 60):  # a backlog a receives in one go and works through slowly
                await js.publish(f"{source}.k0", f"k0:{n}".encode())
            await wait_for(lambda: len(got) >= 10, "a works")
            stopped_at = time.monotonic()
            await a.stop()
            await wait_for(lambda: any(i == "b" for i, *_ in got), "b takes over")
            _, _, delivered, when = next(g for g in got if g[0] == "b")
            assert delivered > 1  # a's backlog, redelivered ...
            assert when - stopped_at < ACK_WAIT / 2  # ... at once
            await wait_for(lambda: {n for _, n, _, _ in got} == set(range(60)), "everything")


async def consume_across_a_delete(
    js: jetstream.JetStream,
    conn: jetstream.JetStream,
    consume: Callable[..., pcgroups.GroupMember],
    stream: str,
    consumer_stream: str,
    consumer: str,
) -> None:
    seen: set[int] = set()

    async def handle(msg: pcgroups.GroupMessage) -> None:
        seen.add(int(msg.data.decode().split(":")[1]))
        await msg.ack()

    async with consume(conn, stream, "g", "m1", handle, config=template()):
        await publish(js, stream, 0, KEYS)  # n = 0
        await wait_for(lambda: 0 in seen, "first round")
        await js.delete_consumer(consumer_stream, consumer)
        await publish(js, stream, KEYS, 2 * KEYS)  # n = 1
        await wait_for(lambda: 1 in seen, "after the delete")
        info = await js.consumer_info(consumer_stream, consumer)
        assert info.config.priority_groups == ["PCG"]


async def test_a_deleted_member_consumer_is_recreated(
    js: jetstream.JetStream, conns: list[jetstream.JetStream], source: str, static_stream: str
) -> None:
    await create_elastic(js, source, ["m1"])
    await pcgroups.create_static(js, static_stream, "g", max_members=3, members=["m1"])
    elastic_stream = pcgroups.wire.elastic_stream_name(source, "g")
    await consume_across_a_delete(
        js, conns[0], pcgroups.consume_elastic, source, elastic_stream, "m1"
    )
    await consume_across_a_delete(
        js, conns[0], pcgroups.consume_static, static_stream, static_stream, "g-m1"
    )
