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
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
from collections.abc import AsyncIterator

import pytest

import jetstream
import pcgroups
from pcgroups import PartitioningFilter
from tests.integration.group_streams import group_stream
from tests.integration.test_pcgroups_processes import Journals, Member, publish, running, wait_for

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


@pytest.mark.parametrize("kind", ["static", "elastic"])
async def test_members_that_outlive_a_server_crash_never_process_an_acked_message_again(
    kind: str, tmp_path: pathlib.Path
) -> None:
    instances = [("m1", "m1"), ("m2", "m2"), ("m3", "m3")]
    journals_at = journal_dir(tmp_path, "journals")
    async with (
        crashable_group(kind, tmp_path) as (server, _),
        running(server.url, kind, STREAM, instances, journals_at, 1) as members,
    ):
        journals = Journals(list(members.values()), MESSAGES)
        await wait_for(lambda: len(journals.processed()) >= MESSAGES // 3, "a third processed")
        await crash(server)
        await all_processed(journals)
        counts = journals.check(strict_order=True)
    print(f"{kind}: members outlived the crash: {counts}")


async def test_confirmed_acks_of_an_elastic_group_survive_a_crash_of_server_and_members(
    tmp_path: pathlib.Path,
) -> None:
    """The members die with the server (kill -9 of all), new ones start after the restart."""
    first = [("m1", "m1"), ("m2", "m2"), ("m3", "m3")]
    second = [(member, f"{member}-after") for member, _ in first]
    journals_at = journal_dir(tmp_path, "journals")
    async with crashable_group("elastic", tmp_path) as (server, _):
        async with running(
            server.url, "elastic", STREAM, first, journals_at, 1, flush=False, confirm=True
        ) as before:
            journals = Journals(list(before.values()), MESSAGES)
            await wait_for(lambda: len(journals.processed()) >= MESSAGES // 3, "a third")
            await asyncio.to_thread(server.kill)
            for member in before.values():
                await member.kill()
        await asyncio.to_thread(server.start)
        async with running(
            server.url, "elastic", STREAM, second, journals_at, 1, flush=False, confirm=True
        ) as after:
            everyone: list[Member] = [*before.values(), *after.values()]
            journals = Journals(everyone, MESSAGES)
            await all_processed(journals)
            counts = journals.check(strict_order=True)
    print(f"elastic, confirmed acks, members killed with the server: {counts}")
