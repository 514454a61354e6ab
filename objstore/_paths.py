"""Opening an upload's source file only if it lies under an allowed root directory.

A path column (``upload_objects``) reads whatever file the executor can read; with an allowed
root, a path that resolves outside it (``..``, an absolute path elsewhere, a symlink pointing
out) is refused before a byte of it is read. The check is made on the file actually opened
(its descriptor), so a symlink swapped in between the check and the open cannot redirect it.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from jetstream import ClientValidationError

from ._errors import PathNotAllowedError
from ._source_file import unreadable_source

__all__ = ["check_root", "open_under_root"]

# Non-blocking: opening a FIFO would otherwise wait for a writer forever (before the check
# could refuse it); no controlling terminal from a device path.
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


def check_root(root: object) -> str:
    """``root`` as given, if it can be an allowed root: an absolute path (a relative one would
    depend on each executor's working directory).

    Raises:
        ClientValidationError: not a non-empty string, or not absolute.
    """
    if not isinstance(root, str | os.PathLike):
        raise ClientValidationError(f"allowed_root must be a path: {root!r}")
    text = os.fspath(root)
    if not isinstance(text, str) or not os.path.isabs(text):
        raise ClientValidationError(f"allowed_root must be an absolute path: {root!r}")
    return text


def open_under_root(path: str, root: str) -> BinaryIO:
    """``path`` opened for reading if it is a regular file whose real path (every symlink
    resolved) lies under the real path of ``root``; the caller closes it.

    Raises:
        PathNotAllowedError: the file lies outside ``root``, or is not a regular file.
        SourceNotFoundError, UnreadableSourceError: the file cannot be opened (missing, no
            permission).
    """
    real_root = os.path.realpath(root)
    if not _inside(os.path.realpath(path), real_root):  # refused before it is even opened
        raise _outside(path, root)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise unreadable_source(path, exc) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PathNotAllowedError(f"{path!r} is not a regular file; nothing was uploaded")
        if not _inside(_opened_path(fd, path), real_root):  # a link swapped in meanwhile
            raise _outside(path, root)
        os.set_blocking(fd, True)
        return open(path, "rb", opener=lambda *_: fd)  # named by its path in errors
    except BaseException:
        os.close(fd)
        raise


def _opened_path(fd: int, path: str) -> str:
    """The real path of the open file: from ``/proc`` where there is one (Linux), else the
    path resolved again (then only the pre-open check guards against a swapped link)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)


def _inside(real_path: str, real_root: str) -> bool:
    try:
        return os.path.commonpath([real_path, real_root]) == real_root
    except ValueError:  # different drives, or one relative and one absolute
        return False


def _outside(path: str, root: str) -> PathNotAllowedError:
    return PathNotAllowedError(
        f"{path!r} resolves outside the allowed root {root!r} (after symlinks); "
        "nothing was uploaded"
    )
