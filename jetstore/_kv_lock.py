"""``jetstore kv lock BUCKET NAME -- COMMAND...``: run a command while holding a lock, as
``flock`` does, and stop it (SIGTERM, then SIGKILL) if the lease is lost."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
from collections.abc import Callable

import click

import jetstream
import kvstore
from kvstore._lease import lease_seconds

from ._connect import Settings, run, verb
from ._output import EXIT_FAILED
from ._values import checked

__all__ = ["lock"]

_log = logging.getLogger("jetstore")

EXIT_NOT_RUN = 127
"""The command could not be started (not found, not executable), as a shell says."""
TOKEN_VARIABLE = "JETSTORE_LEASE_TOKEN"


@click.command("lock")
@click.argument("bucket")
@click.argument("name")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option(
    "--ttl",
    default="30s",
    show_default=True,
    help="Lease TTL (at least 3s): how long a crashed holder keeps the lock.",
)
@click.option(
    "--wait",
    "wait",
    type=click.FloatRange(min=0),
    default=None,
    help="Give up after this many seconds (exit 1); default: wait for ever; 0: try once.",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    help="Seconds the command has, once sent SIGTERM (lease lost, Ctrl-C), before SIGKILL.",
)
@click.option(
    "--foreground",
    is_flag=True,
    help="Run the command in jetstore's process group (it can read the terminal and gets "
    "Ctrl-C itself); then only the command, not what it started, is signalled.",
)
@verb
def lock(
    settings: Settings,
    bucket: str,
    name: str,
    command: tuple[str, ...],
    ttl: str,
    wait: float | None,
    grace: float,
    foreground: bool,
) -> None:
    """Run COMMAND (after --) while holding the lock NAME of BUCKET; exit with its code.

    The command gets the fencing token in $JETSTORE_LEASE_TOKEN. If the lease is lost (not
    renewed in time), the command's process group is sent SIGTERM, then SIGKILL once the
    command ended or after --grace seconds, and the exit code is 1."""
    checked(key=name, ttl=ttl)
    try:
        lease_seconds(ttl)
    except jetstream.ClientValidationError as exc:
        raise click.UsageError(f"{type(exc).__name__}: {exc}") from None

    async def work(js: jetstream.JetStream) -> int:
        opened = await kvstore.open_bucket(js, bucket)
        async with opened.lock(name, ttl=ttl, timeout=wait) as lease:
            env = {**os.environ, TOKEN_VARIABLE: str(lease.token)}
            try:
                child = await asyncio.create_subprocess_exec(
                    *command,
                    env=env,
                    preexec_fn=_dies_with_parent(),
                    process_group=None if foreground else 0,
                )
            except OSError as exc:
                click.echo(f"jetstore: cannot run {command[0]!r}: {exc.strerror}", err=True)
                return EXIT_NOT_RUN
            return await _run_while_held(_Command(child, group=not foreground), lease, grace)

    run(settings, work)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _dies_with_parent() -> Callable[[], None] | None:
    """What the child runs before exec so that the kernel kills it (SIGKILL) if jetstore
    dies without stopping it (kill -9, OOM): nobody renews the lease then, and the server
    frees it after its TTL; the command must not run on beside the next holder. Linux only
    (None elsewhere: there a killed jetstore leaves the command running).

    Everything is looked up before the fork: the child runs only the call itself."""
    if sys.platform != "linux":
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()
    kill = int(signal.SIGKILL)

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, kill, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the call: too late to ask
            os._exit(EXIT_NOT_RUN)

    return die_with_parent


class _Command:
    """The running command: its process and, unless run in the foreground, its process
    group (what it started: a script's commands), which the stop signals reach too."""

    def __init__(self, process: asyncio.subprocess.Process, *, group: bool) -> None:
        self.process = process
        self._group = group

    def send(self, number: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            if self._group:
                os.killpg(self.process.pid, number)
            else:
                self.process.send_signal(number)

    async def stop(self, grace: float) -> None:
        """SIGTERM, then SIGKILL to what is left once the command ended or after ``grace``
        seconds; returns once the command has ended."""
        self.send(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.process.wait()), grace)
        self.send(signal.SIGKILL)
        await self.process.wait()


async def _run_while_held(command: _Command, lease: kvstore.Lease, grace: float) -> int:
    """The command's exit code (128 + N if a signal N ended it), or EXIT_FAILED once the
    lease was lost and the command stopped. The command is stopped too if this is cancelled
    (Ctrl-C, SIGTERM)."""
    exited = asyncio.ensure_future(command.process.wait())
    lost = asyncio.ensure_future(lease.wait_lost())
    try:
        await asyncio.wait({exited, lost}, return_when=asyncio.FIRST_COMPLETED)
        if exited.done():
            code = exited.result()
            return 128 - code if code < 0 else code
        click.echo(f"jetstore: lease on {lease.key!r} lost: stopping the command", err=True)
        await command.stop(grace)
        return EXIT_FAILED
    finally:
        lost.cancel()
        if command.process.returncode is None:
            await command.stop(grace)
        exited.cancel()
