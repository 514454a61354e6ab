"""Two instances of one member whose consumer settings differ (a rolling upgrade changing
``ack_wait``), in separate processes journalling the start, end and ack of each message on one
clock (``pcg_journal_member.py``, checked by ``group_journal.Journals``): the new
instance never takes the member's consumer while the old one uses it, neither when the old one
is asked to step down in the middle of a handler nor while it waits for messages; it takes the
consumer over once the old instance is gone (killed here: after the old ``ack_wait``), so each
key is worked on by one process at a time and no acknowledged message comes again.

Also: both starting at once (one works, the other waits); step-downs every 20 ms through 600
short messages (right after an unpin nothing shows the old instance at work, so the last look
before a replacement is taken with the consumer's deliveries paused); a rolling upgrade in one
process (the new instance takes over right after the old one's ``stop()``). ``-m groups_long``
runs 15 trials of the first two for each kind of group."""

from __future__ import annotations

import asyncio
import functools
import pathlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

import jetstream
import pcgroups
from pcgroups import PartitioningFilter
from tests.pcgroups.group_journal import Journals, Line, Member, wait_for
from tests.pcgroups.group_streams import group_stream, one_member_group
from tests.pcgroups.test_pcgroups_processes import (
    publish,
    published,
    settled_elastic,
    settled_static,
)

pytestmark = pytest.mark.integration
MESSAGES = 10  # keys k0 .. k9, one message each
OLD_ACK_WAIT = 2.0
NEW_ACK_WAIT = 3.0
WORK = "1.0:1.0"  # seconds per message: within either ack_wait
STEP_DOWNS = 2
TOGETHER = 20  # messages for two instances starting at once (keys k0 .. k19)
SHORT_WORK = "0.05:0.1"
LONG_TRIALS = 15
LOOPED = 600  # messages worked through while step-downs come every 20 ms (200 keys)
LOOP_WORK = "0.005:0.01"


@pytest.fixture(params=["static", "elastic"])
async def group(
    request: pytest.FixtureRequest, js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> AsyncIterator[tuple[str, str]]:
    """(kind, stream) of a group ``g`` with one member ``m1`` owning every partition."""
    async with one_member_group(js, unique_name("pio"), request.param) as stream:
        yield request.param, stream


async def test_an_instance_with_other_settings_waits_until_the_other_is_gone(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    group: tuple[str, str],
    tmp_path: pathlib.Path,
) -> None:
    await step_downs_then_a_kill(js, nats_server.url, group, tmp_path)


async def test_instances_with_other_settings_starting_together_never_share_a_key(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    group: tuple[str, str],
    tmp_path: pathlib.Path,
) -> None:
    await starting_together(js, nats_server.url, group, tmp_path)


async def test_step_downs_in_a_loop_never_let_two_instances_share_a_key(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: pathlib.Path,
) -> None:
    """The pinned instance unpinned every 20 ms while it works through short messages: after
    each unpin its waiting pull is refused (423) at the next message and pulled again, and
    for that moment nothing shows it uses the consumer (no pin, no pull, nothing unacked).
    The instance with other settings must not take the consumer away then: before its
    deliveries were paused for the last look, it did about once in 60 step-downs of the
    long trials, and the message in the old instance's hands went to both."""
    async with group_stream(js, unique_name("pil")) as stream:
        await pcgroups.create_elastic(
            js, stream, "g", max_members=1, filters=[PartitioningFilter(f"{stream}.*", (1,))]
        )
        await pcgroups.add_members(js, stream, "g", ["m1"])
        await publish(js, stream, LOOPED)
        members = [
            await Member.start(
                nats_server.url, "elastic", stream, "m1", name, tmp_path,
                ack_wait=ack_wait, delay=LOOP_WORK, flush=True,
            )
            for name, ack_wait in (("old", OLD_ACK_WAIT), ("new", NEW_ACK_WAIT))
        ]  # fmt: skip
        journals = Journals(members)
        try:
            for member in members:
                await member.ready()
            while len(journals.processed()) < LOOPED:
                await pcgroups.elastic_step_down(js, stream, "g", "m1")
                journals.check_exclusive()
                await asyncio.sleep(0.02)  # the pace of the step-downs, no synchronisation
            await settled_elastic(js, stream)
            counts = journals.check(published(LOOPED), ack_wait=OLD_ACK_WAIT, strict_order=True)
        finally:
            for member in members:
                await member.kill()
    print(f"step-downs in a loop: {counts}, {journals.summary()}")


async def test_a_rolling_upgrade_hands_over_once_the_old_instance_stops(
    js: jetstream.JetStream, nats_server: jetstream.EmbeddedServer, group: tuple[str, str]
) -> None:
    """In one process: the new instance waits while the old one runs (so does a third one,
    which stops meanwhile and leaves the consumer as it was), and takes over as soon as the
    old one has stopped (nothing of it in use any more), not an ``ack_wait`` later."""
    kind, stream = group
    consume = pcgroups.consume_static if kind == "static" else pcgroups.consume_elastic
    got: dict[str, list[bytes]] = {"old": [], "new": []}
    arrived = asyncio.Event()

    def handler(name: str) -> Callable[[pcgroups.GroupMessage], Awaitable[None]]:
        async def handle(msg: pcgroups.GroupMessage) -> None:
            got[name].append(msg.data)
            await msg.ack()
            arrived.set()

        return handle

    async def send(data: bytes) -> None:
        arrived.clear()
        await js.publish(f"{stream}.k", data)
        await asyncio.wait_for(arrived.wait(), 30)

    def template(ack_wait: float) -> jetstream.ConsumerConfig:
        return jetstream.ConsumerConfig(ack_wait=ack_wait, max_ack_pending=1)  # type: ignore[arg-type]

    async with await jetstream.connect(nats_server.url) as other:
        old = consume(js, stream, "g", "m1", handler("old"), config=template(OLD_ACK_WAIT))
        new = consume(other, stream, "g", "m1", handler("new"), config=template(NEW_ACK_WAIT))
        async with old, new:
            await send(b"1")
            waiting = consume(other, stream, "g", "m1", handler("new"), config=template(4.0))
            async with waiting:  # a third one, waiting too, stops: it leaves nothing behind
                await send(b"2")
            consumer_stream = stream if kind == "static" else f"{stream}-g"
            consumer_name = "g-m1" if kind == "static" else "m1"
            assert not (await js.consumer_info(consumer_stream, consumer_name)).paused
            await old.stop()
            stopped = time.monotonic()
            await send(b"3")
            print(f"{kind}: the new instance got a message {time.monotonic() - stopped:.2f}s "
                  "after the old one stopped")  # fmt: skip
    assert got == {"old": [b"1", b"2"], "new": [b"3"]}


@pytest.mark.groups_long
@pytest.mark.parametrize("trial", range(LONG_TRIALS))
async def test_many_trials_of_instances_with_other_settings(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    group: tuple[str, str],
    tmp_path: pathlib.Path,
    trial: int,
) -> None:
    await starting_together(js, nats_server.url, group, tmp_path)
    await step_downs_then_a_kill(js, nats_server.url, group, tmp_path)


async def step_downs_then_a_kill(
    js: jetstream.JetStream, url: str, group: tuple[str, str], tmp_path: pathlib.Path
) -> None:
    """The old instance works; the new one starts; the old one is asked to step down in the
    middle of a handler, twice; then it is killed in a handler."""
    kind, stream = group
    old = await Member.start(
        url, kind, stream, "m1", "old", tmp_path, ack_wait=OLD_ACK_WAIT, delay=WORK, flush=True
    )
    new = None
    try:
        await old.ready()
        await publish(js, stream, MESSAGES)
        journals = Journals([old])
        await wait_for(lambda: bool(old.lines()), "the old instance works")
        new = await Member.start(
            url, kind, stream, "m1", "new", tmp_path, ack_wait=NEW_ACK_WAIT, delay=WORK, flush=True
        )
        await new.ready()
        journals = Journals([old, new])
        step_down = pcgroups.static_step_down if kind == "static" else pcgroups.elastic_step_down
        for _ in range(STEP_DOWNS):  # in the middle of a handler of the old instance
            started = await next_start(journals)
            await step_down(js, stream, "g", "m1")
            await wait_for(functools.partial(ended, journals, started), "the handler ends")
        await next_start(journals)
        await old.kill()  # in a handler: its message comes back once its ack_wait is over
        killed_at = old.ended_at
        assert killed_at is not None
        await wait_for(lambda: len(journals.processed()) == MESSAGES, "every message", 30)
        await settled(js, kind, stream)
        counts = journals.check(published(MESSAGES), ack_wait=OLD_ACK_WAIT, strict_order=True)
    finally:
        await old.kill()
        if new is not None:
            await new.kill()
    new_starts = [x.t for x in new.lines() if x.tag == "S"]
    assert new_starts, "the new instance never took over"
    print(f"{kind}: {counts}, the new instance started {(new_starts[0] - killed_at) / 1e9:.2f}s "
          "after the kill")  # fmt: skip
    assert min(new_starts) > killed_at, "the new instance worked while the old one was alive"


async def starting_together(
    js: jetstream.JetStream, url: str, group: tuple[str, str], tmp_path: pathlib.Path
) -> None:
    """Both instances start at once: one gets the member's consumer, the other waits."""
    kind, stream = group
    await publish(js, stream, TOGETHER)
    members = [
        await Member.start(
            url, kind, stream, "m1", name, tmp_path, ack_wait=ack_wait, delay=SHORT_WORK, flush=True
        )
        for name, ack_wait in (("a", OLD_ACK_WAIT), ("b", NEW_ACK_WAIT))
    ]
    journals = Journals(members)
    try:
        for member in members:
            await member.ready()
        await wait_for(lambda: len(journals.processed()) == TOGETHER, "every message", 30)
        await settled(js, kind, stream)
        counts = journals.check(published(TOGETHER), ack_wait=OLD_ACK_WAIT, strict_order=True)
    finally:
        for member in members:
            await member.kill()
    working = {x.instance for x in journals.lines()}
    print(f"{kind}, starting together: {counts}, working: {working}")
    assert len(working) == 1, "both instances worked"


async def settled(js: jetstream.JetStream, kind: str, stream: str) -> None:
    if kind == "static":
        await settled_static(js, stream, ["m1"])
    else:
        await settled_elastic(js, stream)


async def next_start(journals: Journals) -> Line:
    """Wait until a message is started after now; that start, which must be the old
    instance's (the new one waits while the old one lives)."""
    now = time.monotonic_ns()
    await wait_for(lambda: bool(starts_after(journals, now)), "a start")
    first = starts_after(journals, now)[0]
    journals.check_exclusive()
    assert first.instance == "old", f"the new instance worked while the old one was alive: {first}"
    return first


def starts_after(journals: Journals, t: int) -> list[Line]:
    return [x for x in journals.lines() if x.tag == "S" and x.t > t]


def ended(journals: Journals, start: Line) -> bool:
    return any(
        (x.tag, x.key, x.n, x.instance) == ("E", start.key, start.n, start.instance)
        for x in journals.lines()
    )


async def test_a_rolling_upgrade_to_a_setting_a_durable_cannot_change_is_not_silent(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
) -> None:
    """A static member's new instance with ``mem_storage=True`` (the durable has file
    storage), started once the old one has stopped (nothing uses the durable), must either
    not wait without a word: the server refuses the update (500, 10012) the same way each
    time, and the member ends with a typed error quoting the server (it would otherwise ask
    to update the durable about twice a second, for good)."""
    async with group_stream(js, unique_name("pim"), partitions=1) as stream:
        await pcgroups.create_static(js, stream, "g", max_members=1, members=["m1"])
        got: list[bytes] = []
        arrived = asyncio.Event()

        async def handle(msg: pcgroups.GroupMessage) -> None:
            got.append(msg.data)
            await msg.ack()
            arrived.set()

        old_template = jetstream.ConsumerConfig(ack_wait=OLD_ACK_WAIT)  # type: ignore[arg-type]
        new_template = jetstream.ConsumerConfig(ack_wait=OLD_ACK_WAIT, mem_storage=True)  # type: ignore[arg-type]
        old = pcgroups.consume_static(js, stream, "g", "m1", handle, config=old_template)
        async with old:
            await js.publish(f"{stream}.k", b"1")
            await asyncio.wait_for(arrived.wait(), 30)
        arrived.clear()
        async with pcgroups.consume_static(
            js, stream, "g", "m1", handle, config=new_template
        ) as new:
            await js.publish(f"{stream}.k", b"2")
            ended = asyncio.ensure_future(new.done())
            received = asyncio.ensure_future(arrived.wait())
            await asyncio.wait({ended, received}, timeout=10, return_when="FIRST_COMPLETED")
            for waiting in (ended, received):
                waiting.cancel()
            await asyncio.wait({ended, received})
            assert ended.done() and not ended.cancelled(), f"neither took over nor ended: {got}"
            error = ended.exception()
            assert isinstance(error, pcgroups.MemberConsumerRefusedError), repr(error)
            assert "storage" in str(error) and got == [b"1"]
