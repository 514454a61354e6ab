"""`jetstore kv lock BUCKET NAME -- COMMAND`: runs the command holding the lock, with the
fencing token in its environment, exits with its code, and stops it when the lease is lost."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess

import pytest

import jetstream
from tests.cli.cli_helpers import (
    ROOT,
    assert_no_traceback,
    cli_command,
    cli_env,
    close_process,
    jetstore,
)
from tests.conftest import BucketFactory

pytestmark = pytest.mark.integration


async def test_the_command_runs_holding_the_lock_and_its_code_is_the_exit_code(
    nats_server: jetstream.EmbeddedServer, make_bucket: BucketFactory
) -> None:
    bucket = await make_bucket(marker_ttl="1s")
    script = "echo token=$JETSTORE_LEASE_TOKEN; exit 7"
    run = await asyncio.to_thread(
        jetstore, "kv", "lock", bucket.name, "jobs.nightly", "-s", nats_server.url,
        "--ttl", "5s", "--", "sh", "-c", script,
    )  # fmt: skip
    assert run.code == 7, run.err
    token = int(run.text.strip().removeprefix("token="))
    assert token >= 1
    async with bucket.lock("jobs.nightly", ttl=5, timeout=0) as lease:  # released at its end
        assert lease.token > token


async def test_a_lock_held_elsewhere_makes_a_wait_of_zero_fail_without_running_it(
    nats_server: jetstream.EmbeddedServer, make_bucket: BucketFactory
) -> None:
    bucket = await make_bucket()
    async with bucket.lock("jobs.nightly", ttl=30):
        run = await asyncio.to_thread(
            jetstore, "kv", "lock", bucket.name, "jobs.nightly", "-s", nats_server.url,
            "--wait", "0", "--", "echo", "ran",
        )  # fmt: skip
    assert run.code == 1 and run.text == "", run.err
    assert "LockTimeoutError" in run.err or "not acquired" in run.err
    assert_no_traceback(run.err)


async def test_a_lost_lease_stops_the_command_and_exits_1(
    nats_server: jetstream.EmbeddedServer, make_bucket: BucketFactory
) -> None:
    bucket = await make_bucket(marker_ttl="1s")
    process = subprocess.Popen(  # noqa: ASYNC220 (starting it is quick; reading waits)
        [*cli_command("kv", "lock", bucket.name, "jobs.nightly"), "-s", nats_server.url,
         "--ttl", "3s", "--grace", "1", "--",
         "sh", "-c", "echo $JETSTORE_LEASE_TOKEN; exec sleep 60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(), cwd=ROOT,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        token = int(await asyncio.to_thread(process.stdout.readline))
        await bucket.purge("jobs.nightly")  # taken away: the next renewal is refused
        async with bucket.lock("jobs.nightly", ttl=30, timeout=0) as taken:
            assert taken.token > token
            code = await asyncio.to_thread(process.wait, 30)
        assert code == 1
        assert process.stderr is not None
        err = process.stderr.read().decode()
        assert "lease on 'jobs.nightly' lost" in err
        assert_no_traceback(err)
    finally:
        close_process(process)


async def test_sigterm_stops_the_command_and_releases_the_lock(
    nats_server: jetstream.EmbeddedServer, make_bucket: BucketFactory
) -> None:
    bucket = await make_bucket()
    process = subprocess.Popen(  # noqa: ASYNC220 (starting it is quick; reading waits)
        [*cli_command("kv", "lock", bucket.name, "jobs.nightly"), "-s", nats_server.url,
         "--ttl", "60s", "--", "sh", "-c", "echo started; exec sleep 60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(), cwd=ROOT,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        assert await asyncio.to_thread(process.stdout.readline) == b"started\n"
        process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(process.wait, 30) == 143
        async with bucket.lock("jobs.nightly", ttl=5, timeout=0):  # not left to the 60 s TTL
            pass
    finally:
        close_process(process)


async def test_a_lost_lease_stops_what_the_command_started_too(
    nats_server: jetstream.EmbeddedServer, make_bucket: BucketFactory
) -> None:
    # A script's own commands must not run on beside the next holder either.
    bucket = await make_bucket(marker_ttl="1s")
    script = "sleep 60 & echo $!; wait"  # SIGTERM ends the shell, not its sleep
    process = subprocess.Popen(  # noqa: ASYNC220 (starting it is quick; reading waits)
        [*cli_command("kv", "lock", bucket.name, "jobs.nightly"), "-s", nats_server.url,
         "--ttl", "3s", "--grace", "1", "--", "sh", "-c", script],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=cli_env(), cwd=ROOT,
    )  # fmt: skip
    started = 0
    try:
        assert process.stdout is not None
        started = int(await asyncio.to_thread(process.stdout.readline))
        await bucket.purge("jobs.nightly")  # taken away: the next renewal is refused
        assert await asyncio.to_thread(process.wait, 30) == 1
        # The sleep holds the pipe's other end: end of file once it has ended.
        async with asyncio.timeout(20):
            assert await asyncio.to_thread(process.stdout.read) == b""
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(started, signal.SIGKILL)
        close_process(process)


async def test_ctrl_c_stops_the_command_in_its_own_group_and_releases_the_lock(
    nats_server: jetstream.EmbeddedServer, make_bucket: BucketFactory
) -> None:
    # The command's group is not the terminal's: Ctrl-C reaches jetstore, which stops it.
    bucket = await make_bucket()
    process = subprocess.Popen(  # noqa: ASYNC220 (starting it is quick; reading waits)
        [*cli_command("kv", "lock", bucket.name, "jobs.nightly"), "-s", nats_server.url,
         "--ttl", "60s", "--", "sh", "-c", "echo $$; exec sleep 60"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=cli_env(), cwd=ROOT,
    )  # fmt: skip
    child = 0
    try:
        assert process.stdout is not None
        child = int(await asyncio.to_thread(process.stdout.readline))
        assert os.getpgid(child) == child != os.getpgid(process.pid)
        process.send_signal(signal.SIGINT)
        assert await asyncio.to_thread(process.wait, 30) == 130
        assert await asyncio.to_thread(process.stdout.read) == b""  # the command ended
        async with bucket.lock("jobs.nightly", ttl=5, timeout=0):  # not left to the TTL
            pass
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
        close_process(process)


async def test_in_the_foreground_the_command_shares_jetstores_process_group(
    nats_server: jetstream.EmbeddedServer, make_bucket: BucketFactory
) -> None:
    bucket = await make_bucket()
    run = await asyncio.to_thread(
        jetstore, "kv", "lock", bucket.name, "jobs.nightly", "-s", nats_server.url,
        "--foreground", "--", "sh", "-c", "ps -o pgid= -p $$",
    )  # fmt: skip
    assert run.code == 0, run.err
    assert int(run.text) == os.getpgrp()  # jetstore ran in the test's group


async def test_the_command_does_not_outlive_a_killed_jetstore(
    nats_server: jetstream.EmbeddedServer, make_bucket: BucketFactory
) -> None:
    # kill -9 of jetstore: nobody renews the lease, which the server frees after its TTL;
    # a command left running then would run beside the next holder's.
    bucket = await make_bucket()
    process = subprocess.Popen(  # noqa: ASYNC220 (starting it is quick; reading waits)
        [*cli_command("kv", "lock", bucket.name, "jobs.nightly"), "-s", nats_server.url,
         "--ttl", "60s", "--", "sh", "-c", "echo $$; exec sleep 60"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=cli_env(), cwd=ROOT,
    )  # fmt: skip
    child = 0
    try:
        assert process.stdout is not None
        child = int(await asyncio.to_thread(process.stdout.readline))
        process.kill()
        await asyncio.to_thread(process.wait)
        # The command holds the pipe's other end: end of file once it has ended.
        async with asyncio.timeout(20):
            assert await asyncio.to_thread(process.stdout.read) == b""
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
        close_process(process)


@pytest.mark.parametrize(("name", "ttl"), [("jobs.*", "30s"), ("jobs.nightly", "1s")])
def test_a_bad_ttl_or_name_is_refused_before_connecting(name: str, ttl: str) -> None:
    run = jetstore(
        "kv", "lock", "locks", name, "-s", "nats://127.0.0.1:1", "--ttl", ttl, "--",
        "echo", "ran",
    )  # fmt: skip
    assert run.code == 2 and run.text == "", run.err  # 3 if it had tried to connect
    assert ("InvalidKeyError" if "*" in name else "at least 3s") in run.err
