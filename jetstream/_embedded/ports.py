"""Loopback ports for embedded servers, leased so that nothing else takes them.

A port found free by binding port 0 comes from the kernel's ephemeral range, which also
supplies the local end of every outgoing connection: between choosing it and the server
binding it (or binding it again when a killed node restarts) any ``connect()`` on the machine
can take it, and the server exits with "address already in use". Ports are therefore chosen
below that range, and each is held with a lock file for as long as its server object lives,
so that processes running embedded servers side by side (pytest-xdist workers, benchmarks)
never choose the same one.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import stat
import tempfile
import weakref
from pathlib import Path

from .._errors import JetStreamError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: ports are chosen below the range only
    fcntl = None  # type: ignore[assignment]

__all__ = ["PortLease", "lease_port", "unclaimed_range"]

_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10000
_ENOUGH = 1000
_TRIES = 500
_NO_LOCK = -1


class PortLease:
    """A loopback port no other lease holds until :meth:`release`, until the lease is
    garbage-collected, or until the process ends."""

    def __init__(self, port: int, lock_fd: int) -> None:
        self.port = port
        # Closing the file drops its flock; the finalizer also runs when a server object that
        # was never closed goes away, so a forgotten lease does not hold the port for good.
        self._release = weakref.finalize(self, _unlock, lock_fd)

    def release(self) -> None:
        """Let other servers use the port again (idempotent)."""
        self._release()


def _unlock(lock_fd: int) -> None:
    if lock_fd != _NO_LOCK:
        os.close(lock_fd)


def unclaimed_range(ephemeral: tuple[int, int] | None) -> tuple[int, int]:
    """The ports ``[low, high)`` to choose from: below the ephemeral range ``ephemeral``
    (inclusive bounds, as the kernel reports it), else above it, else any unprivileged port."""
    if ephemeral is None:
        return _LOWEST, 32768  # below every platform's default ephemeral range
    low, high = ephemeral
    if low - _LOWEST >= _ENOUGH:
        return _LOWEST, low
    if 65535 - high >= _ENOUGH:
        return high + 1, 65536
    return 1024, 65536


def lease_port() -> PortLease:
    """A free loopback port outside the ephemeral range, leased to the caller.

    Raises:
        JetStreamError: no free port was found.
    """
    low, high = unclaimed_range(_ephemeral_range())
    directory = _lock_directory() if fcntl is not None else None
    for _ in range(_TRIES):
        port = random.randrange(low, high)
        lock_fd = _lock(port, directory)
        if lock_fd is None:
            continue
        lease = PortLease(port, lock_fd)
        if _bindable(port):
            return lease
        lease.release()
    raise JetStreamError(f"no free loopback port in {low}..{high - 1} after {_TRIES} tries")


def _ephemeral_range() -> tuple[int, int] | None:
    try:
        low, high = (int(part) for part in _EPHEMERAL.read_text().split())
    except (OSError, ValueError):
        return None
    return low, high


def _lock(port: int, directory: Path | None) -> int | None:
    """The descriptor holding ``port``'s lock in ``directory`` (``_NO_LOCK`` where there are
    no file locks, or no private directory for them), or None when another lease holds it.
    Lock files are never removed: removing one while another process opens it would let two
    processes lock different files for the same port."""
    if fcntl is None or directory is None:
        return _NO_LOCK
    try:
        fd = os.open(directory / str(port), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return _NO_LOCK
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _lock_directory(base: Path | None = None) -> Path | None:
    """This user's lock directory in ``base``, by default one every process shares whatever
    its ``TMPDIR`` (``/tmp`` where there is one); None when it cannot be made, or is not a
    directory this user alone owns and writes (another user could remove the locks in it)."""
    if base is None:
        base = Path("/tmp") if Path("/tmp").is_dir() else Path(tempfile.gettempdir())
    directory = base / f"jetstore-ports-{os.getuid()}"
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(directory)
    except OSError:
        return None
    private = stat.S_ISDIR(info.st_mode) and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    return directory if private and info.st_uid == os.getuid() else None


def _bindable(port: int) -> bool:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
