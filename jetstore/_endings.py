"""How a verb ends besides its own errors: SIGTERM (cancelled and cleaned up as on Ctrl-C),
a stdout whose reader has gone (``| head``, noticed whatever the size of the write), and a
stdout or stdin the process was started without."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import os
import select
import signal
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO, TextIO

import click

if TYPE_CHECKING:  # pragma: no cover
    from _typeshed import ReadableBuffer

__all__ = [
    "ClosedStdout",
    "Terminated",
    "discard_stdout",
    "ended_by_sigterm",
    "stdin_binary",
    "stdout_closed",
    "whole_writes",
]


class Terminated(Exception):
    """SIGTERM ended the verb: its work was cancelled, and cleaned up, as on Ctrl-C."""


@contextlib.contextmanager
def ended_by_sigterm() -> Iterator[None]:
    """SIGTERM cancels the running verb as Ctrl-C does (an upload removes its chunks, a
    download its temporary file), instead of killing the process on the spot."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    received: list[int] = []

    def on_sigterm() -> None:
        if not received and task is not None:  # once: a second one must not cut the cleanup
            task.cancel()
        received.append(signal.SIGTERM)

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        yield
    except asyncio.CancelledError:
        if received:
            raise Terminated from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def stdout_closed() -> bool:
    """Whether stdout is a pipe (or socket) whose reader has gone."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError):
        return False


def discard_stdout() -> None:
    """Send what is still buffered for stdout, and anything later, nowhere: Python flushes
    stdout at exit, and would report the broken pipe again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


class ClosedStdout(io.TextIOBase):
    """Stands for a stdout the process was started without: writing to it fails as a write
    to a closed descriptor does (``cat >&-``), instead of click dropping the output silently
    (exit 0 for a ``kv info`` whose answer went nowhere) or a verb failing on ``None``."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "stdout is closed")

    @property
    def buffer(self) -> ClosedStdout:  # the bytes side (``kv get``, ``obj get -o -``)
        return self


class _WholeWrites(io.RawIOBase):
    """A file descriptor for a ``BufferedWriter`` whose writes are whole or raise: when a
    pipe's reader goes in the middle of a write larger than the pipe holds, the kernel
    returns a short count, CPython's ``BufferedWriter`` passes it on and the text layer drops
    the rest without a word (``kv keys --json | head -c 20`` exited 0). Here the rest is
    written, and the closed pipe raises ``BrokenPipeError`` as a small write's would."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, buffer: ReadableBuffer, /) -> int:
        view = memoryview(buffer).cast("B")
        size = len(view)
        while view:
            view = view[os.write(self._fd, view) :]
        return size


def whole_writes(stream: TextIO) -> TextIO:
    """``stream`` (stdout) rebuilt on :class:`_WholeWrites`, with its encoding, error handler
    and line buffering; as it is if it has no file descriptor (a test's capture)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return stream
    stream.flush()
    return io.TextIOWrapper(
        io.BufferedWriter(_WholeWrites(fd)),
        encoding=stream.encoding,
        errors=stream.errors,
        line_buffering=bool(stream.line_buffering),
    )


def stdin_binary() -> BinaryIO:
    """stdin's bytes, for ``-`` as an input.

    Raises:
        click.UsageError: the process was started with stdin closed (``<&-``).
    """
    if sys.stdin is None:
        raise click.UsageError("- reads stdin, which is closed")
    return sys.stdin.buffer
