"""A step-down (``static_step_down`` / ``elastic_step_down``) of a member's pinned instance
while it works on a key, another instance of the member (same settings) waiting, in separate
processes journalling start, end and ack of each message (``group_journal.py``): the key
stays with one instance at a time and in order, whatever ``max_ack_pending`` is (the server's
default, with no ``config``, is 1,000): the instance stepped down works through the messages it
had received before the other one, pinned then, receives the newer ones of the same key."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import jetstream
import pcgroups
from pcgroups import PartitioningFilter
from tests.pcgroups.group_journal import Journals, Member, wait_for
from tests.pcgroups.group_streams import group_stream, one_member_group

pytestmark = pytest.mark.integration
ACK_WAIT = 4.0
MESSAGES = 6  # of key k0, 0.6 s of work each: all within ack_wait


@pytest.fixture(params=["static", "elastic"])
async def group(
    request: pytest.FixtureRequest, js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> AsyncIterator[tuple[str, str]]:
    """(kind, stream) of a group ``g`` with one member ``m1`` owning every partition."""
    async with one_member_group(js, unique_name("psd"), request.param) as stream:
        yield request.param, stream


async def step_down_during_a_handler(
    js: jetstream.JetStream, url: str, group: tuple[str, str], tmp: pathlib.Path, mpa: int
) -> None:
    kind, stream = group
    members = [
        await Member.start(
            url, kind, stream, "m1", name, tmp, ack_wait=ACK_WAIT, max_ack_pending=mpa, flush=True
        )
        for name in ("a", "b")
    ]
    journals = Journals(members)
    try:
        for member in members:
            await member.ready()
        for n in range(MESSAGES):
            await js.publish(f"{stream}.k0", f"k0:{n}:0.6".encode())
        await wait_for(lambda: any(x.tag == "S" for x in journals.lines()), "a first start")
        step_down = pcgroups.static_step_down if kind == "static" else pcgroups.elastic_step_down
        await step_down(js, stream, "g", "m1")
        await wait_for(lambda: len(journals.processed()) == MESSAGES and journals.idle(), "all")
        expected = {("k0", n) for n in range(MESSAGES)}
        journals.check(expected, ack_wait=ACK_WAIT, strict_order=True)
    finally:
        for member in members:
            await member.kill()


async def test_a_step_down_during_a_handler_keeps_the_key_with_one_instance(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    group: tuple[str, str],
    tmp_path: pathlib.Path,
) -> None:
    """``max_ack_pending`` 1: the next message goes to the other instance only once the
    stepped-down one has acked the one it works on."""
    await step_down_during_a_handler(js, nats_server.url, group, tmp_path, mpa=1)


async def test_a_step_down_with_messages_buffered_keeps_the_key_with_one_instance(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    group: tuple[str, str],
    tmp_path: pathlib.Path,
) -> None:
    """``max_ack_pending`` 4: the stepped-down instance holds k0:1-3 in its buffer when it is
    unpinned; the README promises one instance per key and per-key order for any
    ``max_ack_pending``, across step-downs of the old instance too."""
    await step_down_during_a_handler(js, nats_server.url, group, tmp_path, mpa=4)


async def test_a_step_down_with_the_default_template_keeps_the_key_with_one_instance(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
) -> None:
    """Two instances of an elastic member in one process (two connections), no ``config``:
    3 messages of key k0, a step-down while the first is handled, 3 more. Unpinned at once, a and
    b alternated on k0 (a 0, b 3, a 1, b 4, a 2, b 5), each start overlapping the other's
    handler."""
    async with (
        group_stream(js, unique_name("psq")) as stream,
        await jetstream.connect(nats_server.url) as other,
    ):
        by_key = PartitioningFilter(f"{stream}.*", (1,))
        await pcgroups.create_elastic(js, stream, "g", max_members=1, filters=[by_key])
        await pcgroups.add_members(js, stream, "g", ["m1"])
        working: set[str] = set()
        overlaps: list[str] = []
        order: list[int] = []
        first, all_done = asyncio.Event(), asyncio.Event()
        release = asyncio.Event()  # the first handler works until the step-down is done

        def handler(name: str) -> Callable[[pcgroups.GroupMessage], Any]:
            async def handle(msg: pcgroups.GroupMessage) -> None:
                if working:
                    overlaps.append(f"{name} started {msg.data!r} while {working} worked")
                working.add(name)
                order.append(int(msg.data))
                first.set()
                await release.wait()
                await asyncio.sleep(0.2)  # work
                working.discard(name)
                await msg.ack()
                if len(order) == MESSAGES:
                    all_done.set()

            return handle

        async with (
            pcgroups.consume_elastic(js, stream, "g", "m1", handler("a")),
            pcgroups.consume_elastic(other, stream, "g", "m1", handler("b")),
        ):
            for n in range(3):
                await js.publish(f"{stream}.k0", str(n).encode())
            await asyncio.wait_for(first.wait(), 30)
            # The step-down waits for what the pinned instance holds: it runs meanwhile.
            step_down = asyncio.create_task(pcgroups.elastic_step_down(js, stream, "g", "m1"))
            for n in range(3, MESSAGES):
                await js.publish(f"{stream}.k0", str(n).encode())
            release.set()
            await asyncio.wait_for(all_done.wait(), 30)
            await step_down
        assert overlaps == [] and order == sorted(order), f"{order}: {overlaps}"
