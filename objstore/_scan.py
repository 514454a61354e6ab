"""Which files of a directory tree an upload takes, and every entry it leaves out with why.

One policy, for ``jetstore obj put DIR`` and for anyone uploading a tree:

- regular files are taken, named by their path relative to the directory (``/``-separated);
- a symbolic link to a regular file inside the directory is taken under the link's name;
- everything else is skipped, and reported: a symbolic link that leads out of the directory
  (after every link on the way), to a directory, to nothing (dangling) or into a loop; a
  FIFO, socket or device; a directory that cannot be listed; a name that is not UTF-8 (no
  object name can hold it).

With ``follow_links`` every symbolic link is followed as ``cp -L`` does, out of the directory
and into linked directories; a link back to a directory above it (a loop) is still skipped.

A file is opened with :meth:`ScannedFile.open`, which checks again on the opened descriptor
that it is a regular file and (without ``follow_links``) still inside the directory: a link
swapped in since the scan cannot make the upload read a file outside the tree.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
from typing import BinaryIO, Literal

from jetstream import ClientValidationError

from ._paths import _inside, open_under_root

__all__ = ["DirectoryScan", "ScannedFile", "SkippedEntry", "scan_directory"]

SkipKind = Literal[
    "link-out",
    "link-to-directory",
    "dangling-link",
    "link-loop",
    "special",
    "unreadable",
    "name-not-utf8",
]
"""Why an entry is left out: a link out of the directory, a link to a directory (without
``follow_links``), a dangling link, a link loop, a FIFO, socket or device, a directory or
entry that cannot be read, a name that is not UTF-8."""


@dataclasses.dataclass(frozen=True)
class ScannedFile:
    """A file an upload of the directory takes."""

    name: str
    """Its path relative to the directory, ``/``-separated: the object name (before any
    prefix)."""
    path: str
    """The path to read it from (the directory as given, joined with ``name``)."""
    size: int
    """Its size when it was scanned."""
    root: str
    """What it must still lie under when opened: the directory's real path (``/`` with
    ``follow_links``)."""

    def open(self) -> BinaryIO:
        """The file opened for reading; the caller closes it.

        Raises:
            PathNotAllowedError: it is no longer a regular file, or (without ``follow_links``)
                now resolves outside the directory (a link swapped in since the scan).
            OSError: it cannot be opened (gone, no permission).
        """
        return open_under_root(self.path, self.root)


@dataclasses.dataclass(frozen=True)
class SkippedEntry:
    """An entry of the tree an upload leaves out."""

    path: str
    kind: SkipKind
    reason: str
    """Why, in words (``"a FIFO, not a regular file"``)."""


@dataclasses.dataclass(frozen=True)
class DirectoryScan:
    """The files of a tree to upload, sorted by name, and the entries left out, by path."""

    files: tuple[ScannedFile, ...]
    skipped: tuple[SkippedEntry, ...]


def scan_directory(
    directory: str | os.PathLike[str], *, follow_links: bool = False
) -> DirectoryScan:
    """The files under ``directory`` an upload takes, and every entry it leaves out (see the
    module's policy). ``directory`` itself may be a symbolic link: the tree is what it leads to.

    Raises:
        ClientValidationError: ``directory`` is not a directory (or not a path).
    """
    top = _checked_directory(directory)
    real_top = os.path.realpath(top)
    scan = _Scan(real_top, follow_links)
    scan.walk(top)
    return DirectoryScan(
        tuple(sorted(scan.files, key=lambda file: file.name)),
        tuple(sorted(scan.skipped, key=lambda entry: entry.path)),
    )


def _checked_directory(directory: object) -> str:
    text = os.fspath(directory) if isinstance(directory, str | os.PathLike) else None
    if not isinstance(text, str) or "\0" in text or not os.path.isdir(text):
        raise ClientValidationError(f"not a directory: {directory!r}")
    return text


class _Scan:
    """One walk of a tree (with a stack, not recursion: a tree may be deeper than Python's
    recursion limit)."""

    def __init__(self, real_top: str, follow_links: bool) -> None:
        self._real_top = real_top
        self._follow_links = follow_links
        self._root = os.path.abspath(os.sep) if follow_links else real_top
        self.files: list[ScannedFile] = []
        self.skipped: list[SkippedEntry] = []

    def walk(self, top: str) -> None:
        # (path, name prefix, real paths of the directories it lies in, itself included)
        pending: list[tuple[str, str, tuple[str, ...]]] = [(top, "", (self._real_top,))]
        while pending:
            path, prefix, above = pending.pop()
            try:
                with os.scandir(path) as listing:
                    entries = list(listing)
            except OSError as exc:
                self._skip(path, "unreadable", f"cannot be listed: {exc.strerror or exc}")
                continue
            for entry in entries:
                directory = self._entry(entry, prefix, above)
                if directory is not None:
                    pending.append((entry.path, f"{prefix}{entry.name}/", (*above, directory)))

    def _entry(self, entry: os.DirEntry[str], prefix: str, above: tuple[str, ...]) -> str | None:
        """Take or skip one entry; for a directory to walk, its real path."""
        if not _is_utf8(entry.name):
            self._skip(
                entry.path, "name-not-utf8", "its name is not UTF-8 (no object name holds it)"
            )
            return None
        link = _is_link(entry)
        try:
            info = os.stat(entry.path) if link else entry.stat(follow_symlinks=False)
        except OSError as exc:
            self._skip(entry.path, *_unfollowable(exc, link=link))
            return None
        if stat.S_ISDIR(info.st_mode):
            if not link:  # its real path follows from its parent's (realpath: O(depth))
                return os.path.join(above[-1], entry.name)
            return self._linked_directory(entry.path, above)
        if link and not self._leads_inside(entry.path):
            return None
        if stat.S_ISREG(info.st_mode):
            self.files.append(
                ScannedFile(prefix + entry.name, entry.path, info.st_size, self._root)
            )
        else:
            self._skip(entry.path, "special", f"{_special(info.st_mode)}, not a regular file")
        return None

    def _linked_directory(self, path: str, above: tuple[str, ...]) -> str | None:
        """The real path of a linked directory to walk, or None (skipped)."""
        if not self._follow_links:
            if self._leads_inside(path):
                self._skip(
                    path,
                    "link-to-directory",
                    "a symbolic link to a directory (its files are taken under their own path)",
                )
            return None
        real = os.path.realpath(path)
        if real in above:
            self._skip(path, "link-loop", "a symbolic link to a directory it lies in (a loop)")
            return None
        return real

    def _leads_inside(self, link: str) -> bool:
        """Whether the link may be followed: it leads inside the directory, or links are
        followed anywhere; a link out is skipped."""
        real = os.path.realpath(link)
        if self._follow_links or _inside(real, self._real_top):
            return True
        self._skip(
            link, "link-out", f"a symbolic link that leads out of the directory (to {real!r})"
        )
        return False

    def _skip(self, path: str, kind: SkipKind, reason: str) -> None:
        self.skipped.append(SkippedEntry(path, kind, reason))


def _is_link(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_symlink()
    except OSError:  # gone meanwhile: its stat says so
        return False


def _unfollowable(error: OSError, *, link: bool) -> tuple[SkipKind, str]:
    if link and error.errno in (errno.ENOENT, errno.ENOTDIR):
        return "dangling-link", "a symbolic link to nothing (dangling)"
    if link and error.errno == errno.ELOOP:
        return "link-loop", "a symbolic link that leads to itself (a loop)"
    return "unreadable", f"cannot be read: {error.strerror or error}"


def _special(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def _is_utf8(name: str) -> bool:
    try:
        name.encode()
    except UnicodeEncodeError:  # undecodable bytes of the file name, as lone surrogates
        return False
    return True
