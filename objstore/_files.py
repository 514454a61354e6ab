"""Downloads into a file that may sit in a directory shared with others, and the file an
object name may become (:func:`local_path`).

The object is written to a temporary file this call creates itself, exclusively and without
following links (``O_CREAT | O_EXCL | O_NOFOLLOW``, a random name next to the target), then
synced and renamed onto the target. Nothing anyone planted is ever opened: a symlink at a
predictable ``<path>.part`` is not ours, and a link at ``path`` itself is replaced by the
rename, not written through. On any failure (including cancellation) only the temporary file
this call created is removed; the target and every other file stay as they were.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from jetstream import ClientValidationError

from ._download import ChunkReader
from ._errors import PathNotAllowedError

__all__ = ["check_target", "local_path", "save_to_file"]

_WRITE_BATCH = 4 * 1024 * 1024
"""Bytes handed to one write: one batch is written while the next arrives."""

_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_NAME_TRIES = 16


def check_target(path: object) -> Path:
    """``path`` as the file a download may be renamed onto: a ``str`` path (or path-like)
    whose last component names a file.

    Raises:
        ClientValidationError: not a str path, an embedded NUL, or no file name (``""``,
            ``"."``, ``".."``, ``"/"``); the os and pathlib errors would be raw and late.
    """
    text = os.fspath(path) if isinstance(path, str | os.PathLike) else None
    if not isinstance(text, str) or "\0" in text:
        raise ClientValidationError(f"path must be a str path without NUL: {path!r}")
    target = Path(text)
    if target.name in ("", ".", ".."):
        raise ClientValidationError(f"path names no file: {path!r}")
    return target


def local_path(directory: str | os.PathLike[str], name: str) -> Path:
    """Where object ``name`` is saved as a file under ``directory`` (a whole store copied
    into it, say): its path split at ``/``, ``logs/a.txt`` as ``directory/logs/a.txt``. Any
    peer may store any name, so only a name that stays inside ``directory`` and that a
    listing of it shows as it is becomes a file name.

    Raises:
        PathNotAllowedError: ``name`` is absolute, climbs out (``..``), has empty or ``.``
            parts (two names would share a file), or holds a backslash or a character that
            is not printable (``str.isprintable``: a control character such as ESC, a newline
            or NUL, a bidi override, an invisible space); save it under a name of your own.
    """
    parts = name.split("/") if isinstance(name, str) else [""]
    if any(part in ("", ".", "..") for part in parts):
        why = "it has an empty, '.' or '..' part, or is absolute"
    elif "\\" in name or not name.isprintable():
        why = "it holds a backslash or a character that is not printable"
    else:
        return Path(directory).joinpath(*parts)
    raise PathNotAllowedError(f"object name {name!r} is not a safe relative path: {why}")


def _create_temporary(target: Path) -> tuple[int, Path]:
    """A new file next to ``target`` that nobody else can have opened or linked: its name is
    random (128 bits) and O_EXCL refuses anything already there, a symlink included. Mode
    0o666 minus the umask, as ``open(path, "wb")`` would have given the target."""
    for _ in range(_NAME_TRIES):
        # The target's name shortened so the temporary one stays within NAME_MAX (255).
        candidate = target.with_name(f".{target.name[:200]}.{secrets.token_hex(16)}.part")
        try:
            return os.open(candidate, _FLAGS, 0o666), candidate
        except FileExistsError:
            continue  # someone holds this name: never touch it, pick another
    raise FileExistsError(f"no free temporary name next to {target} after {_NAME_TRIES} tries")


def _write_all(fd: int, pieces: list[bytes]) -> None:
    for piece in pieces:
        view = memoryview(piece)
        while view:
            view = view[os.write(fd, view) :]


def _finish(fd: int, temporary: Path, target: Path) -> None:
    """Durable, then visible: the bytes reach the disk before the name does."""
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, target)
    _sync_directory(target.parent)


def _sync_directory(folder: Path) -> None:
    """Make the rename itself durable where the platform can (POSIX); best effort."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # e.g. a file system that cannot sync directories: the file itself is synced
    finally:
        os.close(fd)


async def save_to_file(
    reader: ChunkReader, target: Path, progress: Callable[[int, int | None], None] | None
) -> None:
    """Write every chunk of ``reader`` to ``target`` through a temporary file of its own.

    Raises:
        whatever the reader raises (the target untouched); OSError from the file system.
    """
    loop = asyncio.get_running_loop()
    fd, temporary = await _settled(loop.run_in_executor(None, _create_temporary, target))
    closed = False
    try:
        await _copy(reader, fd, progress)
        closed = True  # _finish closes it whatever happens next
        finishing = loop.run_in_executor(None, _finish, fd, temporary, target)
        try:
            await asyncio.shield(finishing)
        except asyncio.CancelledError:
            # Cancelled during the sync or rename: let it settle before cleaning up (the
            # object may then be in place: it is complete and verified).
            await asyncio.wait([finishing])
            if not finishing.cancelled():
                finishing.exception()
            raise
    except BaseException:
        if not closed:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):  # renamed already, or never created
            temporary.unlink()
        raise


async def _settled(creating: asyncio.Future[tuple[int, Path]]) -> tuple[int, Path]:
    """The temporary file; cancelled meanwhile, the file the thread still creates is removed
    (it is ours) before the cancellation goes on."""
    try:
        return await asyncio.shield(creating)
    except asyncio.CancelledError:
        await asyncio.wait([creating])
        if not creating.cancelled() and creating.exception() is None:
            fd, temporary = creating.result()
            os.close(fd)
            temporary.unlink(missing_ok=True)
        raise


async def _copy(
    reader: ChunkReader, fd: int, progress: Callable[[int, int | None], None] | None
) -> None:
    """The chunks into ``fd`` in ~4 MiB batches, one batch in flight while the next arrives."""
    loop = asyncio.get_running_loop()
    done = 0
    pending: list[bytes] = []
    batched = 0
    writing: asyncio.Future[None] | None = None
    try:
        async for chunk in reader:
            pending.append(chunk)
            batched += len(chunk)
            done += len(chunk)
            if batched >= _WRITE_BATCH:
                if writing is not None:
                    await writing
                writing = loop.run_in_executor(None, _write_all, fd, pending)
                pending, batched = [], 0
            if progress is not None:
                progress(done, reader.info.size)
        if writing is not None:
            await writing
        await loop.run_in_executor(None, _write_all, fd, pending)
    finally:
        if writing is not None and not writing.done():
            await asyncio.wait([writing])  # the descriptor must outlive every write on it
