"""An upload's source file: opened with typed errors, read in chunks, and any change to it
during the read noticed.

A regular file read directly (a path, or a binary file object over its descriptor) has a size
and a modification time when the upload opens it. After every read both are compared with what
``fstat`` says now, and at the end of the file the bytes read with the size at open: a file
truncated, appended to or rewritten while it was read would otherwise be stored torn (the start
of one version and the rest of another, or a prefix) and reported as a success. A difference
raises :class:`SourceChangedError` before the last chunk is sent, so the upload stores nothing.

Pipes, sockets, devices and file objects that wrap something else (``io.BytesIO``, gzip) have
no size to compare: the object is exactly what was read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import os
import stat
from pathlib import Path
from typing import BinaryIO

from jetstream import WrongTypeError

from ._errors import SourceChangedError, SourceNotFoundError, UnreadableSourceError

__all__ = ["FileChunks", "unreadable_source"]


def open_source(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading, its errors typed and naming it.

    Raises:
        SourceNotFoundError: nothing there (a ``str`` source is always taken as a path).
        UnreadableSourceError: a directory, no permission, a NUL in it, another OS error.
        WrongTypeError: a path-like that gives bytes.
    """
    try:
        return open(Path(path), "rb")
    except OSError as exc:
        raise unreadable_source(path, exc) from exc
    except ValueError as exc:  # an embedded NUL
        raise UnreadableSourceError(f"cannot open {os.fspath(path)!r}: {exc}") from exc
    except TypeError as exc:
        raise WrongTypeError(f"a path source must be a str path: {path!r}") from exc


def unreadable_source(path: str | os.PathLike[str], error: OSError) -> UnreadableSourceError:
    """The typed error for an upload path that ``open`` refused with ``error``."""
    shown = repr(os.fspath(path))
    if isinstance(error, FileNotFoundError):
        return SourceNotFoundError(
            f"no file {shown}: a str source is taken as a path "
            "(to store the text itself, give bytes: text.encode())",
            error,
        )
    return UnreadableSourceError(f"cannot read {shown}: {error.strerror or error}", error)


@dataclasses.dataclass(frozen=True, slots=True)
class _Stamp:
    """What ``fstat`` says of the file; compared after every read."""

    size: int
    mtime_ns: int


def _stamp(fd: int) -> _Stamp:
    status = os.fstat(fd)
    return _Stamp(status.st_size, status.st_mtime_ns)


class FileChunks:
    """The chunks of a binary ``file``, read in a thread from where it stands. ``size`` is
    what is left of it at open (None when the file is not a regular file read directly). An
    ``owned`` file (one the upload opened) is closed at its end or by :meth:`aclose`, which
    the upload always calls, also when it ends before the first read (a class, not an async
    generator, whose ``finally`` would not run then, leaving the file to the collector).

    Raises (from ``__anext__``):
        SourceChangedError: the file changed since the chunks were made.
        WrongTypeError: the file is not binary (``read`` gave no bytes).
        OSError: a read failed.
    """

    def __init__(self, file: BinaryIO, chunk_size: int, *, owned: bool) -> None:
        self._file = file
        self._chunk_size = chunk_size
        self._owned = owned
        self._done = 0
        self._ended = False
        self._fd = _regular_fd(file)
        self._opened: _Stamp | None = None
        self.size: int | None = None
        if self._fd is not None:
            self._opened = _stamp(self._fd)
            self.size = max(0, self._opened.size - file.tell())

    @classmethod
    def of_path(cls, path: str | os.PathLike[str], chunk_size: int) -> FileChunks:
        """The chunks of the file at ``path``, opened now (errors as :func:`open_source`)."""
        file = open_source(path)
        try:
            return cls(file, chunk_size, owned=True)
        except BaseException:
            file.close()
            raise

    def __aiter__(self) -> FileChunks:
        return self

    async def __anext__(self) -> bytes:
        if self._ended:
            raise StopAsyncIteration
        chunk, now = await asyncio.get_running_loop().run_in_executor(None, self._read)
        if not isinstance(chunk, bytes):
            raise WrongTypeError(f"the file must be opened in binary mode, read gave {type(chunk)}")
        self._done += len(chunk)
        if now is not None:
            self._check(now, at_end=not chunk)
        if not chunk:
            await self.aclose()  # an owned file is closed at its end, not when collected
            raise StopAsyncIteration
        return chunk

    async def aclose(self) -> None:
        self._ended = True
        if self._owned:
            self._file.close()

    def _read(self) -> tuple[bytes, _Stamp | None]:
        """One chunk and, for a regular file, its stamp right after the read (in a thread)."""
        chunk = self._file.read(self._chunk_size)
        return chunk, None if self._fd is None else _stamp(self._fd)

    def _check(self, now: _Stamp, *, at_end: bool) -> None:
        opened = self._opened
        assert opened is not None and self.size is not None
        if now.size != opened.size:
            raise self._changed(f"its size went from {opened.size} to {now.size} bytes")
        if now.mtime_ns != opened.mtime_ns:
            raise self._changed("it was modified (its modification time moved)")
        # A file that says size 0 may still have content (/proc): nothing to count against.
        if self.size and (self._done > self.size or (at_end and self._done < self.size)):
            raise self._changed(f"{self._done} bytes were read of the {self.size} it held")

    def _changed(self, why: str) -> SourceChangedError:
        name = getattr(self._file, "name", None)
        what = repr(name) if isinstance(name, str | bytes) else "the source file"
        return SourceChangedError(
            f"{what} changed while it was uploaded ({why}); nothing was stored: "
            "upload it again once nothing writes to it"
        )


def _regular_fd(file: BinaryIO) -> int | None:
    """The descriptor ``file`` reads directly, if it is a regular file: a ``FileIO`` or a
    buffered reader over one (what ``open(path, "rb")`` gives). A wrapper with a descriptor
    that reads something else from it (gzip's decompressed bytes) has no size to compare."""
    if not isinstance(getattr(file, "raw", file), io.FileIO):
        return None
    try:
        fd = file.fileno()
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (OSError, ValueError):  # closed, or no descriptor after all
        return None
