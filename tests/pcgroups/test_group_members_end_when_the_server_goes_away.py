"""Group members whose owners are cancelled, also right after their server stopped, froze
(SIGSTOP) or died (kill -9): static and elastic members and watch-group members, run with a
handler (one of them hanging, with an ``ack_wait`` of 30 s) and iterated, each end within
twice the request timeout; nothing outside the error tree escapes, not even to the loop's
exception handler; and no task a member started (nor a subscription of its pulls) is left
running. A program that returns from ``asyncio.run`` with members still running exits at
once, without tracebacks."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import pathlib
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

import jetstream
from tests.pcgroups.running_group_members import create_groups, start_members

pytestmark = pytest.mark.integration
TIMEOUT = 1.0  # the request timeout of the members' connection
BOUND = 2 * TIMEOUT + 3.0  # twice the request timeout, plus slack for a busy machine
FAULTS: dict[str, Callable[[jetstream.EmbeddedServer], None]] = {
    "stopped": jetstream.EmbeddedServer.stop,
    "paused": jetstream.EmbeddedServer.pause,
    "killed": jetstream.EmbeddedServer.kill,
}
PROGRAM = pathlib.Path(__file__).with_name("running_group_members.py")


@pytest.fixture
def server() -> Iterator[jetstream.EmbeddedServer]:
    """A server of this test's own: the test stops, pauses or kills it."""
    with jetstream.EmbeddedServer() as own:
        yield own


def connection_task(task: asyncio.Task[Any]) -> bool:
    """One of nats-py's own tasks of the connection (reading, reconnecting...): the
    connection's, not a member's."""
    return getattr(task.get_coro(), "__qualname__", "").startswith("Client.")


@contextlib.asynccontextmanager
async def loop_errors() -> AsyncIterator[list[dict[str, Any]]]:
    """What reaches the loop's exception handler meanwhile (collected tasks included)."""
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        yield reported
        gc.collect()  # "Task exception was never retrieved" is told when a task is collected
    finally:
        loop.set_exception_handler(None)


@pytest.mark.parametrize("fault", ["running", *FAULTS])
async def test_cancelled_members_end_in_bounded_time_whatever_the_server_does(
    server: jetstream.EmbeddedServer, fault: str
) -> None:
    async with loop_errors() as reported:
        js = await jetstream.connect(server.url, timeout=TIMEOUT)
        try:
            bucket = await create_groups(js)
            before = asyncio.all_tasks()
            owners = await start_members(js, bucket)
            if fault != "running":
                FAULTS[fault](server)
            for owner in owners:
                owner.cancel()
            loop = asyncio.get_running_loop()
            started = loop.time()
            _, pending = await asyncio.wait(owners, timeout=BOUND)
            assert not pending, f"members still running {BOUND}s after their cancel"
            took = loop.time() - started
            for owner in owners:
                assert owner.cancelled() or isinstance(owner.exception(), jetstream.JetStreamError)
            left = {t for t in asyncio.all_tasks() - before if not connection_task(t)}
            assert not left, f"tasks outlived their members ({took:.1f}s): {left}"
        finally:
            server.resume()
            await js.close()
    assert reported == []


@pytest.mark.parametrize("fault", ["running", *FAULTS])
def test_a_program_returning_with_members_running_exits_at_once(
    server: jetstream.EmbeddedServer, fault: str
) -> None:
    program = subprocess.Popen(
        [sys.executable, str(PROGRAM), server.url, str(TIMEOUT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert program.stdout is not None and program.stdin is not None
        assert program.stdout.readline() == b"consuming\n"
        if fault != "running":
            FAULTS[fault](server)
        started = time.monotonic()
        program.stdin.write(b"return\n")
        program.stdin.flush()
        _, err = program.communicate(timeout=BOUND + 10)
        took = time.monotonic() - started
    finally:
        server.resume()
        if program.poll() is None:
            program.kill()
            program.communicate()
    text = err.decode()
    for sign in ("Traceback", "never retrieved", "unhandled exception", "destroyed"):
        assert sign not in text, text
    assert program.returncode == 0, text
    assert took < BOUND, f"exited {took:.1f}s after main returned"
