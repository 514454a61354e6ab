"""The object store's errors: subclasses of the protocol errors in :mod:`jetstream`::

JetStreamError
├── ServerError
│   ├── StreamNotFoundError  ── StoreNotFoundError    the store's OBJ_<store> stream is missing
│   ├── StreamExistsError    ── StoreExistsError      same name, other configuration
│   └── MessageNotFoundError ── ObjectNotFoundError   no such object (or deleted, expired)
├── ClientValidationError    ── InvalidObjectNameError
│                            ── PathNotAllowedError   an upload path outside ``allowed_root``,
│                                                     an object name unsafe as a file name
│                            ── UnreadableSourceError an upload path that cannot be opened
│                               └── SourceNotFoundError   no file there (a str is a path)
├── FastBatchError           ── UploadFailedError     the upload stored nothing
│                               └── SourceChangedError    the file changed while it was read
├── DigestMismatchError                               a download does not match its meta
├── ObjectExistsError                                 a link would replace an object
├── ObjectChangedError                                a rewrite met a concurrent write each time
├── InvalidObjectMetaError                            a meta record unreadable or not trustworthy
└── ObjectLinkError                                   links that loop or chain too deep
"""

from __future__ import annotations

import functools

from jetstream import (
    ClientValidationError,
    FastBatchError,
    JetStream,
    JetStreamError,
    MessageNotFoundError,
    StreamExistsError,
    StreamNotFoundError,
)
from jetstream._api.missing_stream import MissingStream

__all__ = [
    "DigestMismatchError",
    "DuplicateObjectNameError",
    "InvalidObjectMetaError",
    "InvalidObjectNameError",
    "ObjectChangedError",
    "ObjectExistsError",
    "ObjectLinkError",
    "ObjectNotFoundError",
    "PathNotAllowedError",
    "SourceChangedError",
    "SourceNotFoundError",
    "StoreExistsError",
    "StoreNotFoundError",
    "UnreadableSourceError",
    "UploadFailedError",
    "missing_store",
]


class StoreNotFoundError(StreamNotFoundError):
    """The object store ``store`` (its ``OBJ_<store>`` stream) does not exist: never created,
    or deleted (by any client) while a handle to it was in use."""

    def __init__(self, store: str, description: str = "") -> None:
        super().__init__(
            description or f"object store {store!r} not found", code=404, err_code=10059
        )
        self.store = store


class StoreExistsError(StreamExistsError):
    """An object store with this name exists with a different configuration."""


class ObjectNotFoundError(MessageNotFoundError):
    """No such object in the store (never stored, deleted, or expired)."""

    def __init__(self, name: str, description: str = "") -> None:
        super().__init__(description or f"object not found: {name!r}", code=404)
        self.name = name


class InvalidObjectNameError(ClientValidationError):
    """An object name that cannot be stored (empty, not a str, or not UTF-8 text)."""


class PathNotAllowedError(ClientValidationError, PermissionError):
    """An upload's source path resolves (after symlinks) outside the ``allowed_root`` it was
    given, or is not a regular file: nothing of it is read or uploaded. Also an object name
    that :func:`objstore.local_path` refuses as a file name: nothing is written."""


class UnreadableSourceError(ClientValidationError, OSError):
    """An upload's source path cannot be opened: a directory, no permission, a NUL in the
    path; nothing was sent. ``errno``, ``strerror`` and ``filename`` are the OS error's."""

    def __init__(self, message: str, cause: OSError | None = None) -> None:
        super().__init__(message)
        if cause is not None:
            self.errno, self.strerror, self.filename = cause.errno, cause.strerror, cause.filename


class SourceNotFoundError(UnreadableSourceError, FileNotFoundError):
    """No file at an upload's source path. A ``str`` source is always a path: text to store
    is given as bytes (``text.encode()``)."""


class UploadFailedError(FastBatchError):
    """An object upload failed; no meta was written and its chunks were removed."""


class SourceChangedError(UploadFailedError):
    """An upload's source file changed while it was read: its size or modification time is not
    what it was when the upload opened it, or it held more or fewer bytes than that size. The
    object would mix two versions of the file: nothing was stored (no meta, no chunks)."""


class DigestMismatchError(JetStreamError):
    """A downloaded object's SHA-256 digest, size or chunk count differs from its meta."""


class ObjectExistsError(JetStreamError):
    """A link was to replace an existing object that is not a link."""


class ObjectChangedError(JetStreamError):
    """An object's meta record changed between reading and rewriting it more often than the
    rewrite retries (a store under constant writes to that name); nothing was written."""


class InvalidObjectMetaError(JetStreamError):
    """An object's meta record is not ADR-20 JSON (not an object, or fields of the wrong type),
    or has fields no ADR-20 writer produces (a nuid that is not one literal subject token,
    negative or inconsistent sizes, another object's name or store, a link to an invalid store
    name). Raised on direct access (``info``, reads, rewrites); listings skip such records
    with a warning; nothing is ever purged on their word."""


class ObjectLinkError(JetStreamError):
    """Following links did not reach an object: they loop (``A -> B -> A``) or chain more
    than :data:`objstore.MAX_LINK_DEPTH` links deep. ``chain`` holds the ``store/name`` hops."""

    def __init__(self, message: str, chain: tuple[str, ...]) -> None:
        super().__init__(message)
        self.chain = chain


class DuplicateObjectNameError(ClientValidationError):
    """One upload job names the same object on several rows: the winner would be arbitrary
    (names the duplicates; raised before anything is uploaded)."""

    def __init__(self, message: str, names: tuple[str, ...]) -> None:
        super().__init__(message)
        self.names = names


def missing_store(js: JetStream, store: str) -> MissingStream:
    """The object store layer's one translator of a missing store: around any operation on
    ``store``, "stream not found" (and a 503 confirmed to mean it) becomes
    :class:`StoreNotFoundError` naming it (see ``jetstream._api.missing_stream``)."""
    stream = f"OBJ_{store}"  # as _models.stream_name (importing it here would be circular)
    return MissingStream(js, stream, functools.partial(StoreNotFoundError, store))
