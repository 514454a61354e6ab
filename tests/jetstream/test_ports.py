"""Ports for embedded servers: chosen outside the kernel's ephemeral range (which outgoing
connections draw from) and leased, so two processes starting servers never pick the same one."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from jetstream._embedded.ports import (
    _ephemeral_range,
    _lock,
    _lock_directory,
    lease_port,
    unclaimed_range,
)


def _try_lock(port: int) -> int | None:
    """``port``'s lock file descriptor, or None while a lease holds the port."""
    return _lock(port, _lock_directory())


def test_the_range_avoids_the_ephemeral_ports() -> None:
    assert unclaimed_range((32768, 60999)) == (10000, 32768)
    assert unclaimed_range((1024, 40000)) == (40001, 65536), "above when below is too small"
    assert unclaimed_range((1024, 65000)) == (1024, 65536), "nowhere else to go"
    assert unclaimed_range(None) == (10000, 32768)


def test_leased_ports_are_distinct_and_outside_the_ephemeral_range() -> None:
    low, high = unclaimed_range(_ephemeral_range())
    leases = [lease_port() for _ in range(50)]
    try:
        ports = [lease.port for lease in leases]
        assert len(set(ports)) == len(ports)
        assert all(low <= port < high for port in ports)
        assert _try_lock(ports[0]) is None, "a held port cannot be leased again"
    finally:
        for lease in leases:
            lease.release()
    again = _try_lock(ports[0])
    assert again is not None, "a released port can be leased again"
    os.close(again)


def test_a_port_leased_by_another_process_is_not_chosen() -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import sys
                from jetstream._embedded.ports import lease_port
                lease = lease_port()
                print(lease.port, flush=True)
                sys.stdin.read()
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        port = int(holder.stdout.readline())
        assert _try_lock(port) is None
    finally:
        holder.communicate(b"")
    again = _try_lock(port)
    assert again is not None, "the lease ends with its process"
    os.close(again)


def test_a_lease_nobody_released_ends_with_its_object() -> None:
    lease = lease_port()
    port = lease.port
    assert _try_lock(port) is None, "held while the lease lives"
    del lease
    gc.collect()
    again = _try_lock(port)
    assert again is not None, "released with the object"
    os.close(again)


def test_a_lock_directory_other_users_can_write_is_not_used(tmp_path: Path) -> None:
    shared = tmp_path / f"jetstore-ports-{os.getuid()}"
    shared.mkdir()
    shared.chmod(0o777)
    assert _lock_directory(tmp_path) is None
    shared.chmod(0o700)
    assert _lock_directory(tmp_path) == shared
