"""Group members whose handlers are slow, in separate processes with a shared journal
(``group_journal.py``): a handler that acks late makes only its own message come again,
not every later one (messages do not age in the member's buffer); ``stop()`` and a
membership change let a running handler finish, also one that keeps its message with
``in_progress()`` beyond ``ack_wait``, and hand its partition over as soon as it has; a
standby instance of the member never starts a key while the handler still works on it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import jetstream
import pcgroups
from pcgroups import MemberMapping, PartitioningFilter
from tests.conftest import BucketFactory
from tests.pcgroups.group_journal import Journals, Line, Member, wait_for
from tests.pcgroups.group_streams import group_stream

pytestmark = pytest.mark.integration
ACK_WAIT = 2.0  # seconds


@contextlib.asynccontextmanager
async def members(
    url: str, tmp: pathlib.Path, *specs: tuple[str, str, str, str], **options: Any
) -> AsyncIterator[dict[str, Member]]:
    """A process per (kind, stream, member, instance), ready; all killed on the way out."""
    started: dict[str, Member] = {}
    options.setdefault("ack_wait", ACK_WAIT)
    try:
        for kind, stream, member, instance in specs:
            started[instance] = await Member.start(
                url, kind, stream, member, instance, tmp, **options
            )
        for m in started.values():
            await m.ready()
        yield started
    finally:
        for m in started.values():
            await m.kill()


def first(journals: Journals, tag: str, key: str, n: int, instance: str | None = None) -> Line:
    """The first ``tag`` line of message ``key:n`` (of ``instance``)."""
    return next(
        x
        for x in journals.lines()
        if (x.tag, x.key, x.n) == (tag, key, n) and instance in (None, x.instance)
    )


def has(journals: Journals, tag: str, key: str, n: int, instance: str | None = None) -> bool:
    return any(
        (x.tag, x.key, x.n) == (tag, key, n) and instance in (None, x.instance)
        for x in journals.lines()
    )


@pytest.fixture
async def stream(js: jetstream.JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    async with group_stream(js, unique_name("psh")) as name:
        yield name


async def one_partition_elastic(js: jetstream.JetStream, stream: str, members: list[str]) -> None:
    await pcgroups.create_elastic(
        js, stream, "g", max_members=1, filters=[PartitioningFilter(f"{stream}.*", [1])]
    )
    if members:
        await pcgroups.add_members(js, stream, "g", members)


async def test_a_late_ack_brings_back_only_the_late_message(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    make_bucket: BucketFactory,
    tmp_path: pathlib.Path,
) -> None:
    """Handlers of 60% of ``ack_wait`` and one of 130% (``max_ack_pending`` 1): the late
    message comes again (its ack came too late), nothing else does; before, every later
    message waited in the member's buffer behind the redelivery until its own ack timer ran
    out, and ran twice. Static, elastic and watch-group members side by side, with a handler
    and iterated."""
    plans = [f"k0:{n}:{'2.6/1.2' if n == 1 else '1.2'}" for n in range(6)]
    async with contextlib.AsyncExitStack() as stack:
        static = await stack.enter_async_context(group_stream(js, unique_name("pls"), partitions=1))
        await pcgroups.create_static(js, static, "g", max_members=1, members=["m1"])
        elastic = await stack.enter_async_context(group_stream(js, unique_name("ple")))
        await one_partition_elastic(js, elastic, ["m1"])
        await pcgroups.create_elastic(
            js, elastic, "i", max_members=1, filters=[PartitioningFilter(f"{elastic}.*", [1])]
        )
        await pcgroups.add_members(js, elastic, "i", ["m1"])
        bucket = await make_bucket(history=10)
        for group in ("g", "i"):
            await pcgroups.create_bucket_group(bucket, group, max_members=1, members=["m1"])
            stack.push_async_callback(pcgroups.delete_bucket_group, bucket, group)
        specs = [
            ("static", static, "m1", "static"),
            ("elastic", elastic, "m1", "elastic"),
            ("watch", bucket.name, "m1", "watch"),
        ]
        running = await stack.enter_async_context(members(nats_server.url, tmp_path, *specs))
        iterated = [
            ("elastic", elastic, "m1", "elastic-iter"),
            ("watch", bucket.name, "m1", "watch-iter"),
        ]
        running |= await stack.enter_async_context(
            members(nats_server.url, tmp_path, *iterated, iterate=True, group="i")
        )
        for plan in plans:
            await js.publish(f"{static}.k0", plan.encode())
            await js.publish(f"{elastic}.k0", plan.encode())
            await bucket.put("k0", plan.encode())
        each = {name: Journals([m]) for name, m in running.items()}
        for journals in each.values():
            await wait_for(lambda j=journals: len(j.processed()) == 6 and j.idle(), "all six")  # type: ignore[misc]
        for name, journals in each.items():
            journals.check({("k0", n) for n in range(6)}, ack_wait=ACK_WAIT, strict_order=True)
            assert journals.again() <= {("k0", 1)}, f"{name}: {sorted(journals.again())}"


def pinned_one(journals: Journals, key: str, n: int, pair: tuple[str, str]) -> tuple[str, str]:
    """(the instance of ``pair`` that started ``key:n``, the other one)."""
    busy = first(journals, "S", key, n).instance
    return busy, next(i for i in pair if i != busy)


async def test_stop_lets_a_running_handler_finish_then_hands_over(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: pathlib.Path,
) -> None:
    """``stop()`` while a handler works for 3 s, keeping its message with ``in_progress()``
    every 0.5 s (``ack_wait`` 2 s, request timeout 1 s), a standby instance of the member
    waiting: the handler finishes (before, it was cancelled a request timeout into the
    stop), the standby starts nothing of the key meanwhile and takes over at once after."""
    async with contextlib.AsyncExitStack() as stack:
        static = await stack.enter_async_context(group_stream(js, unique_name("pss"), partitions=1))
        await pcgroups.create_static(js, static, "g", max_members=1, members=["m1"])
        elastic = await stack.enter_async_context(group_stream(js, unique_name("pse")))
        await one_partition_elastic(js, elastic, ["m1"])
        specs = [
            (kind, stream, "m1", f"{kind}-{x}")
            for kind, stream in (("static", static), ("elastic", elastic))
            for x in "ab"
        ]
        running = await stack.enter_async_context(
            members(nats_server.url, tmp_path, *specs, timeout=1.0)
        )
        for stream in (static, elastic):
            for plan in ("k0:0:3:0.5", "k0:1", "k0:2"):
                await js.publish(f"{stream}.k0", plan.encode())
        for kind in ("static", "elastic"):
            journals = Journals([running[f"{kind}-a"], running[f"{kind}-b"]])
            await wait_for(lambda j=journals: has(j, "S", "k0", 0), f"{kind} starts")  # type: ignore[misc]
            busy, standby = pinned_one(journals, "k0", 0, (f"{kind}-a", f"{kind}-b"))
            running[busy].ask_to_stop()
        for kind in ("static", "elastic"):
            journals = Journals([running[f"{kind}-a"], running[f"{kind}-b"]])
            busy, standby = pinned_one(journals, "k0", 0, (f"{kind}-a", f"{kind}-b"))
            await wait_for(lambda j=journals: len(j.processed()) == 3 and j.idle(), kind)  # type: ignore[misc]
            assert not has(journals, "C", "k0", 0), f"{kind}: the handler was cancelled"
            journals.check({("k0", n) for n in range(3)}, ack_wait=ACK_WAIT, strict_order=True)
            assert journals.again() == set(), f"{kind}: {journals.again()}"
            finished = first(journals, "E", "k0", 0, busy).t
            stopped = first(journals, "T", "-", 0, busy).t
            taken_over = first(journals, "S", "k0", 1, standby).t
            assert finished <= stopped, f"{kind}: stop() returned before the handler ended"
            assert 0 < (taken_over - finished) / 1e9 < 1.0, f"{kind}: took over late"


async def test_a_membership_change_lets_the_handler_finish_then_hands_over_at_once(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    stream: str,
    tmp_path: pathlib.Path,
) -> None:
    """The partition moves from m1 to m2 while m1's handler works for 3 s (``ack_wait`` 6 s,
    request timeout 1 s, no standby): the handler finishes (before: cancelled after a
    request timeout) and m2 gets the partition as soon as it has (before: another
    ``ack_wait`` later, and the cancelled message ran again)."""
    await one_partition_elastic(js, stream, ["m1"])
    specs = [("elastic", stream, "m1", "m1"), ("elastic", stream, "m2", "m2")]
    async with members(nats_server.url, tmp_path, *specs, timeout=1.0, ack_wait=6.0) as running:
        journals = Journals(list(running.values()))
        for plan in ("k0:0:3", "k0:1", "k0:2"):
            await js.publish(f"{stream}.k0", plan.encode())
        await wait_for(lambda: has(journals, "S", "k0", 0), "m1 starts")
        await pcgroups.set_member_mappings(js, stream, "g", [MemberMapping("m2", [0])])
        await wait_for(lambda: len(journals.processed()) == 3 and journals.idle(), "all three")
        assert not has(journals, "C", "k0", 0), "the handler was cancelled"
        journals.check({("k0", n) for n in range(3)}, ack_wait=6.0, strict_order=True)
        assert journals.again() == set()
        finished = first(journals, "E", "k0", 0, "m1").t
        taken_over = first(journals, "S", "k0", 1, "m2").t
        assert 0 < (taken_over - finished) / 1e9 < 1.5


@pytest.mark.parametrize("iterate", [False, True], ids=["handler", "iterated"])
async def test_in_progress_keeps_a_key_from_the_standby_while_its_partition_moves(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    stream: str,
    tmp_path: pathlib.Path,
    iterate: bool,
) -> None:
    """A 4 s handler calling ``in_progress()`` every 0.5 s (``ack_wait`` 2 s) while a new
    member takes some of its member's partitions, a standby instance of that member
    waiting: nobody starts the key until the handler has finished (before: the standby,
    finding nobody pinned once the busy instance stopped pulling, replaced the consumer and
    started the message again at about 2.4 s)."""
    await pcgroups.create_elastic(
        js, stream, "g", max_members=2, filters=[PartitioningFilter(f"{stream}.*", [1])]
    )
    await pcgroups.add_members(js, stream, "g", ["m1"])
    specs = [
        ("elastic", stream, "m1", "m1a"),
        ("elastic", stream, "m1", "m1b"),
        ("elastic", stream, "m2", "m2"),
    ]
    async with members(nats_server.url, tmp_path, *specs, iterate=iterate) as running:
        journals = Journals(list(running.values()))
        keys = ["k0", "k1"]  # one in each partition: whichever moves, the other stays
        assert {pcgroups.wire.hash_partition(k.encode(), 2) for k in keys} == {0, 1}
        for n in range(3):
            for key in keys:
                plan = "k0:0:4:0.5" if (key, n) == ("k0", 0) else f"{key}:{n}"
                await js.publish(f"{stream}.{key}", plan.encode())
        await wait_for(lambda: has(journals, "S", "k0", 0), "m1 starts")
        await pcgroups.add_members(js, stream, "g", ["m2"])
        await wait_for(lambda: len(journals.processed()) == 6 and journals.idle(), "all six")
        journals.check(
            {(k, n) for k in keys for n in range(3)}, ack_wait=ACK_WAIT, strict_order=True
        )
        assert journals.again() == set()
        assert {x.instance for x in journals.lines() if x.tag == "S"} >= {"m2"}


async def test_a_handler_that_overruns_its_ack_wait_is_cancelled_and_its_message_handed_back(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    stream: str,
) -> None:
    """``stop()`` while a handler hangs (no ``in_progress()``): it is cancelled once its
    message's ``ack_wait`` has run out, and only then does the standby instance get the
    message, at once (nak'ed; before: the stopping instance stopped pulling, its pin
    lapsed, and the standby got the message while the handler still ran)."""
    await one_partition_elastic(js, stream, ["m1"])
    events: list[tuple[str, str, float]] = []  # (instance, what, when)
    loop = asyncio.get_running_loop()

    def handler(instance: str) -> Callable[[pcgroups.GroupMessage], object]:
        async def handle(msg: pcgroups.GroupMessage) -> None:
            events.append((instance, f"start {msg.data.decode()}", loop.time()))
            if msg.data == b"0" and instance == "a":
                try:
                    await asyncio.Event().wait()  # hangs
                finally:
                    events.append((instance, "cancelled", loop.time()))
            await msg.ack()

        return handle

    config = jetstream.ConsumerConfig(ack_wait=ACK_WAIT)
    async with contextlib.AsyncExitStack() as stack:
        conns = [await stack.enter_async_context(await jetstream.connect(nats_server.url))]
        conns.append(await stack.enter_async_context(await jetstream.connect(nats_server.url)))
        a = pcgroups.consume_elastic(conns[0], stream, "g", "m1", handler("a"), config=config)
        b = pcgroups.consume_elastic(conns[1], stream, "g", "m1", handler("b"), config=config)
        await stack.enter_async_context(a)
        await js.publish(f"{stream}.k0", b"0")
        await wait_for(lambda: bool(events), "a starts")
        await stack.enter_async_context(b)
        await js.publish(f"{stream}.k0", b"1")
        stopped_at = loop.time()
        await a.stop()
        await wait_for(lambda: any(e[:2] == ("b", "start 1") for e in events), "b takes over")
    cancelled = next(t for i, what, t in events if what == "cancelled")
    b_first = next((what, t) for i, what, t in events if i == "b")
    assert b_first[0] == "start 0" and b_first[1] >= cancelled  # never both at once
    assert cancelled - stopped_at >= ACK_WAIT * 0.8  # it had its ack_wait
    assert b_first[1] - cancelled < ACK_WAIT / 2  # handed back at once


TRIALS = int(os.environ.get("JETSTORE_GROUP_TRIALS", "4"))
TRIAL_KEYS = 12
TRIAL_MESSAGES = 48


async def churn_trial(
    js: jetstream.JetStream, url: str, stream: str, tmp: pathlib.Path, seed: int, mpa: int
) -> str:
    """One trial on ``stream`` (see below): "ok", "again <n>" or "broken: <why>"."""
    rng = random.Random(seed)
    await pcgroups.create_elastic(
        js, stream, "g", max_members=4, filters=[PartitioningFilter(f"{stream}.*", [1])]
    )
    await pcgroups.add_members(js, stream, "g", ["m1", "m2"])
    specs = [("elastic", stream, f"m{i}", f"m{i}") for i in (1, 2, 3)]
    async with members(url, tmp, *specs, max_ack_pending=mpa) as running:
        journals = Journals(list(running.values()))
        for i in range(TRIAL_MESSAGES):
            key, n = f"k{i % TRIAL_KEYS}", i // TRIAL_KEYS
            work = rng.uniform(0.3, 0.9) * ACK_WAIT
            await js.publish(f"{stream}.{key}", f"{key}:{n}:{work:.3f}".encode())
        changes = [("add", "m3"), ("drop", "m1"), ("add", "m1"), ("drop", "m3")]
        for step, (what, name) in enumerate(changes, 1):
            await wait_for(
                lambda step=step: len(journals.processed()) >= 8 * step,  # type: ignore[misc]
                f"progress before change {step}",
                timeout=120,
            )
            change = pcgroups.add_members if what == "add" else pcgroups.delete_members
            await change(js, stream, "g", [name])
        await wait_for(
            lambda: len(journals.processed()) == TRIAL_MESSAGES and journals.idle(),
            "every message",
            timeout=180,
            state=journals.summary,
        )
        expected = {(f"k{i % TRIAL_KEYS}", i // TRIAL_KEYS) for i in range(TRIAL_MESSAGES)}
        try:
            journals.check(expected, ack_wait=ACK_WAIT, strict_order=True)
        except AssertionError as exc:
            return f"broken: {exc}"
        again = journals.again()
        return f"again {len(again)}" if again else "ok"


@pytest.mark.groups_long
@pytest.mark.timeout(60 * TRIALS * 3)
@pytest.mark.parametrize("max_ack_pending", [1, 4])
async def test_handlers_near_ack_wait_across_membership_changes(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: pathlib.Path,
    max_ack_pending: int,
) -> None:
    """Trials: 48 messages over 12 keys, each handled for 30-90% of ``ack_wait``, while
    members are added and dropped (a change every 8 messages processed); the journals must
    show every message processed once, each key in order and by one member at a time.
    ``JETSTORE_GROUP_TRIALS`` sets the number of trials (default 4)."""
    outcomes: list[str] = []
    for trial in range(TRIALS):
        trial_dir = tmp_path / str(trial)
        trial_dir.mkdir()
        async with group_stream(js, unique_name(f"plt{trial}")) as stream:
            outcome = await churn_trial(
                js, nats_server.url, stream, trial_dir, trial, max_ack_pending
            )
            outcomes.append(outcome)
    print(f"max_ack_pending={max_ack_pending}: {outcomes}")
    assert outcomes == ["ok"] * TRIALS
