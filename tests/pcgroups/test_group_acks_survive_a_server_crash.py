"""A group's acknowledgements across a crash of its server (kill -9, restarted on the same
store), with members in processes journalling the start, end and ack of every message
(``pcg_journal_member.py``, checked by ``test_pcgroups_processes.Journals``).

nats-server applies an ack in memory and writes a consumer's state to disk at most ten times a
second, so a crash loses the last ~0.1 s of acks; on a work-queue stream (elastic and watch
groups) an applied ack has also removed the message from the stream's store, which the crash
does not undo, but an ack the server has read and not yet applied is lost too. The lost ones
are delivered again, many with ``delivered`` 1.

- Members that outlive the crash recognise what they acknowledged and acknowledge it again
  without handling it: no message is processed again after its ack, each key stays in order.
- Members that die with the server (a machine crash) remember nothing: with ``confirm_acks``
  an ack that returned is one the server applied, which on an elastic group's work queue
  survives the crash; a static group's consumer state on one server can still lose it (a
  documented limit, measured in docs/RELIABILITY.md).

``-m groups_long`` repeats every case (members outliving the crash, with a standby instance
each, or dying with the server; plain or confirmed acks) ``JETSTORE_GROUP_TRIALS`` times and
prints how many messages were processed again after their ack (the counts in
docs/RELIABILITY.md rows 74-77).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
from collections.abc import AsyncIterator
from typing import Final

import pytest

import jetstream
import pcgroups
from pcgroups import PartitioningFilter
from tests.pcgroups.group_journal import Journals, Member, wait_for
from tests.pcgroups.group_streams import group_stream
from tests.pcgroups.test_pcgroups_processes import ACK_WAIT, publish, published, running

pytestmark = pytest.mark.integration
MESSAGES = 3000
STREAM = "CRASH"


@contextlib.asynccontextmanager
async def crashable_group(
    kind: str, tmp: pathlib.Path
) -> AsyncIterator[tuple[jetstream.EmbeddedServer, jetstream.JetStream]]:
    """A server of the test's own (it is killed), its store in ``tmp``, holding a group
    ``g`` of 3 members (static: 3 partitions; elastic: 3 partitions by key) on ``CRASH``,
    which holds the ``MESSAGES`` messages."""
    async with (
        jetstream.EmbeddedServer(store_dir=tmp / "server") as server,
        await jetstream.connect(server.url) as js,
        group_stream(js, STREAM, partitions=3 if kind == "static" else 0),
    ):
        members = ["m1", "m2", "m3"]
        if kind == "static":
            await pcgroups.create_static(js, STREAM, "g", max_members=3, members=members)
        else:
            by_key = [PartitioningFilter(f"{STREAM}.*", (1,))]
            await pcgroups.create_elastic(js, STREAM, "g", max_members=3, filters=by_key)
            await pcgroups.add_members(js, STREAM, "g", members)
        await publish(js, STREAM, MESSAGES)
        yield server, js


async def crash(server: jetstream.EmbeddedServer) -> None:
    """kill -9 the server and start it again on the same port and store."""
    await asyncio.to_thread(server.kill)
    await asyncio.to_thread(server.start)


async def all_processed(journals: Journals) -> None:
    await wait_for(
        lambda: len(journals.processed()) == MESSAGES, "every message", state=journals.summary
    )


def journal_dir(tmp: pathlib.Path, name: str) -> pathlib.Path:
    path = tmp / name
    path.mkdir()
    return path


def instances(standbys: bool) -> list[tuple[str, str]]:
    """m1-m3, each with a second (standby) instance when ``standbys``."""
    names = [(f"m{i}", f"m{i}") for i in range(1, 4)]
    return names + [(member, f"{member}b") for member, _ in names] if standbys else names


async def members_outlive_the_crash(
    kind: str, tmp: pathlib.Path, *, standbys: bool = False, confirm: bool = False
) -> Journals:
    """kill -9 and restart the server a third in; the member processes go on. Acks are
    journalled once flushed (``confirm``: once confirmed)."""
    async with (
        crashable_group(kind, tmp) as (server, _),
        running(
            server.url,
            kind,
            STREAM,
            instances(standbys),
            journal_dir(tmp, "journals"),
            1,
            flush=not confirm,
            confirm=confirm,
        ) as members,
    ):
        journals = Journals(list(members.values()))
        await wait_for(lambda: len(journals.processed()) >= MESSAGES // 3, "a third processed")
        await crash(server)
        await all_processed(journals)
        return journals


async def the_machine_crashes(kind: str, tmp: pathlib.Path, *, confirm: bool) -> Journals:
    """kill -9 of the server and every member process at once, a third in; new member
    processes start after the restart."""
    first = instances(False)
    second = [(member, f"{member}-after") for member, _ in first]
    journals_at = journal_dir(tmp, "journals")
    async with crashable_group(kind, tmp) as (server, _):
        async with running(
            server.url, kind, STREAM, first, journals_at, 1, flush=not confirm, confirm=confirm
        ) as before:
            journals = Journals(list(before.values()))
            await wait_for(lambda: len(journals.processed()) >= MESSAGES // 3, "a third")
            await asyncio.to_thread(server.kill)
            for member in before.values():
                await member.kill()
        await asyncio.to_thread(server.start)
        async with running(
            server.url, kind, STREAM, second, journals_at, 1, flush=not confirm, confirm=confirm
        ) as after:
            everyone: list[Member] = [*before.values(), *after.values()]
            journals = Journals(everyone)
            await all_processed(journals)
            return journals


def processed_again(journals: Journals) -> int:
    """Processings of a message that began after its ack was journalled."""
    acked: set[tuple[str, int]] = set()
    again = 0
    for x in journals.lines():
        if x.tag == "A":
            acked.add((x.key, x.n))
        elif x.tag == "S":
            again += (x.key, x.n) in acked
    return again


@pytest.mark.parametrize("kind", ["static", "elastic"])
async def test_members_that_outlive_a_server_crash_never_process_an_acked_message_again(
    kind: str, tmp_path: pathlib.Path
) -> None:
    journals = await members_outlive_the_crash(kind, tmp_path)
    counts = journals.check(published(MESSAGES), ack_wait=ACK_WAIT, strict_order=True)
    print(f"{kind}: members outlived the crash: {counts}")


async def test_confirmed_acks_of_an_elastic_group_survive_a_crash_of_server_and_members(
    tmp_path: pathlib.Path,
) -> None:
    """The members die with the server (a machine crash), new ones start after the restart."""
    journals = await the_machine_crashes("elastic", tmp_path, confirm=True)
    counts = journals.check(published(MESSAGES), ack_wait=ACK_WAIT, strict_order=True)
    print(f"elastic, confirmed acks, machine crash: {counts}")


TRIALS = int(os.environ.get("JETSTORE_GROUP_TRIALS", "5"))
HOLDS: Final = {
    ("static", "outlive", False),
    ("elastic", "outlive", False),
    ("elastic", "outlive with standbys", True),
    ("elastic", "machine crash", True),
}
"""The (kind, crash, confirm_acks) whose trials must process nothing again after its ack;
the others are counted for docs/RELIABILITY.md (rows 74-77)."""


@pytest.mark.groups_long
@pytest.mark.timeout(60 * TRIALS)
@pytest.mark.parametrize("confirm", [False, True], ids=["plain", "confirmed"])
@pytest.mark.parametrize("crash", ["outlive", "outlive with standbys", "machine crash"])
@pytest.mark.parametrize("kind", ["static", "elastic"])
async def test_acks_across_server_crashes_in_repeated_trials(
    kind: str, crash: str, confirm: bool, tmp_path: pathlib.Path
) -> None:
    """``JETSTORE_GROUP_TRIALS`` trials (5) of each case; ``-s`` prints the counts."""
    counts = []
    for trial in range(TRIALS):
        tmp = journal_dir(tmp_path, f"trial{trial}")
        if crash == "machine crash":
            journals = await the_machine_crashes(kind, tmp, confirm=confirm)
        else:
            standbys = crash == "outlive with standbys"
            journals = await members_outlive_the_crash(
                kind, tmp, standbys=standbys, confirm=confirm
            )
        counts.append(processed_again(journals))
        if (kind, crash, confirm) in HOLDS:
            journals.check(published(MESSAGES), ack_wait=ACK_WAIT, strict_order=True)
    print(f"{kind}, {crash}, {'confirmed' if confirm else 'plain'} acks: again {counts}")
