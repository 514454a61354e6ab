"""Reading what a write verb stores from a file or stdin: never more than the verb can use
(the caller gives the bound), and off the event loop in a thread that Ctrl-C and SIGTERM do
not wait for.

A thread blocked reading a terminal or a pipe whose writer is idle cannot be stopped: the
loop's own executor would be joined when the verb ends (``asyncio.run`` waits for it), so an
interrupted verb would hang until the writer sent more. A daemon thread is left behind and
ends with the process. stdin is read through a file object of its own over descriptor 0
(never ``sys.stdin``, whose lock the interpreter takes when it exits)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import threading
from collections.abc import Callable
from typing import TypeVar

from ._endings import stdin_binary

__all__ = ["STDIN", "in_thread", "open_input", "read_at_most", "refuse_closed_stdin"]

T = TypeVar("T")

STDIN = "-"
"""The path that names stdin."""

_PIECE = 1 << 20


async def in_thread(function: Callable[..., T], *args: object) -> T:
    """``function(*args)`` in a daemon thread of its own, awaited without blocking the loop;
    cancelling the await leaves the thread to end with the process."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def target() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(function(*args))
        except BaseException as exc:  # handed to the awaiting task, raised there
            future.set_exception(exc)

    threading.Thread(target=target, name="jetstore-input", daemon=True).start()
    return await asyncio.wrap_future(future)


def refuse_closed_stdin(path: str) -> str:
    """``path``, checked before connecting: ``-`` needs a stdin.

    Raises:
        click.UsageError: ``-`` with stdin closed (``<&-``).
    """
    if path == STDIN:
        stdin_binary()
    return path


def open_input(path: str) -> io.BufferedReader:
    """``path`` opened for reading its bytes; ``-`` is stdin (descriptor 0 is left open).

    Raises:
        click.UsageError: ``-`` with stdin closed (``<&-``).
        OSError: the file cannot be opened.
    """
    if path == STDIN:
        return io.BufferedReader(io.FileIO(stdin_binary().fileno(), "rb", closefd=False))
    return open(path, "rb")  # the caller closes it


def read_at_most(path: str, size: int) -> bytes:
    """The first ``size`` bytes of ``path`` (``-``: stdin), fewer if it ends before: a value
    larger than a bucket takes is refused after its limit plus one byte, however long the
    input (``--file /dev/zero``).

    Raises:
        click.UsageError: ``-`` with stdin closed.
        OSError: the file cannot be opened or read.
    """
    pieces: list[bytes] = []
    held = 0
    with open_input(path) as source:
        while held < size:
            piece = source.read1(min(size - held, _PIECE))
            if not piece:
                break
            pieces.append(piece)
            held += len(piece)
    return b"".join(pieces)
