"""The KV layer's errors: subclasses of the protocol errors in :mod:`jetstream`, so a caller
can catch a bucket problem by its KV name or by the JetStream condition underneath::

    JetStreamError
    ├── ServerError
    │   ├── StreamNotFoundError  ── BucketNotFoundError   the bucket's KV_<bucket> stream is missing
    │   ├── StreamExistsError    ── BucketExistsError     same name, other configuration
    │   ├── MessageNotFoundError ── KeyNotFoundError      no live value
    │   └── WrongLastSequenceError
    │       ├── WrongRevisionError                        CAS failed (key, expected, current)
    │       └── KeyExistsError                            create over a live value
    ├── ClientValidationError
    │   ├── InvalidKeyError                               a key or key filter breaks the KV rules
    │   │   └── FilterNotSupportedError                   a wildcard the key codec cannot encode
    │   └── ValueEncodeError                              a typed view cannot encode this value
    ├── KeyDecodeError                                    a stored key the key codec cannot decode
    ├── ValueDecodeError                                  a stored value a typed view cannot decode
    ├── LeaseLostError                                    a lease is no longer held
    └── LockTimeoutError (also TimeoutError)              a lock was not acquired in time
"""

from __future__ import annotations

import functools

from jetstream import (
    ClientValidationError,
    JetStream,
    JetStreamError,
    MessageNotFoundError,
    StreamExistsError,
    StreamNotFoundError,
    WrongLastSequenceError,
)
from jetstream._api.missing_stream import MissingStream

__all__ = [
    "BucketExistsError",
    "BucketNotFoundError",
    "FilterNotSupportedError",
    "InvalidKeyError",
    "KeyDecodeError",
    "KeyExistsError",
    "KeyNotFoundError",
    "LeaseLostError",
    "LockTimeoutError",
    "ValueDecodeError",
    "ValueEncodeError",
    "WrongRevisionError",
    "missing_bucket",
]


class BucketNotFoundError(StreamNotFoundError):
    """The KV bucket ``bucket`` (its ``KV_<bucket>`` stream) does not exist: never created,
    or deleted (by any client) while a handle to it was in use."""

    def __init__(self, bucket: str, description: str = "") -> None:
        super().__init__(description or f"bucket {bucket!r} not found", code=404, err_code=10059)
        self.bucket = bucket


class BucketExistsError(StreamExistsError):
    """A KV bucket with this name already exists with a different configuration."""


class KeyNotFoundError(MessageNotFoundError):
    """The key has no live value: never written, deleted, purged or expired."""

    def __init__(self, key: str, description: str = "") -> None:
        super().__init__(description or f"key not found: {key!r}", code=404)
        self.key = key


class WrongRevisionError(WrongLastSequenceError):
    """A compare-and-set write found another revision than the one expected.

    ``current`` is the key's current revision when the server reported it (0 = no value).
    """

    def __init__(self, key: str, expected: int, current: int | None, *, err_code: int) -> None:
        now = "unknown" if current is None else str(current)
        super().__init__(
            f"wrong revision for key {key!r}: expected {expected}, current {now}",
            code=400,
            err_code=err_code,
        )
        self.key = key
        self.expected = expected
        self.current = current


class KeyExistsError(WrongLastSequenceError):
    """``create`` found a live value for the key (``revision`` is its revision)."""

    def __init__(self, key: str, revision: int | None, *, err_code: int) -> None:
        super().__init__(f"key exists: {key!r}", code=400, err_code=err_code)
        self.key = key
        self.revision = revision


class InvalidKeyError(ClientValidationError):
    """A KV key (or key filter) does not follow the NATS KV key rules."""


class FilterNotSupportedError(InvalidKeyError):
    """A key filter has a wildcard (``*``, ``>``) that the bucket's key codec cannot encode
    (it does not implement :class:`kvstore.FilterableKeyCodec`); list all keys and filter on
    the client instead."""


class KeyDecodeError(JetStreamError):
    """A stored key (``subject`` is its subject) that the bucket's key codec cannot decode:
    written by a client that does not use the codec, or with another one."""

    def __init__(self, subject: str, reason: str) -> None:
        super().__init__(f"cannot decode stored key {subject!r}: {reason}")
        self.subject = subject


class ValueEncodeError(ClientValidationError):
    """A typed view was given a value it cannot encode as its type (nothing was sent). The
    message names the key and what is wrong, never the value."""


class ValueDecodeError(JetStreamError):
    """A stored value that a typed view cannot decode as its type: names the ``key`` and the
    ``revision`` (the stored bytes are in ``value``; the message never quotes them)."""

    def __init__(self, key: str, revision: int, reason: str, value: bytes = b"") -> None:
        super().__init__(f"value of key {key!r} at revision {revision} does not decode: {reason}")
        self.key = key
        self.revision = revision
        self.value = value


class LeaseLostError(JetStreamError):
    """A lease (of a lock or an election) is no longer held: a renewal or a fenced write was
    refused by the server because the lease key changed (it expired, was released, or another
    client holds it now), or the client could not renew it in time. A fenced write that raises
    it stored nothing. ``key`` is the lease key, ``token`` the lease's fencing token."""

    def __init__(self, key: str, token: int, reason: str) -> None:
        super().__init__(f"lease on key {key!r} (token {token}) lost: {reason}")
        self.key = key
        self.token = token


class LockTimeoutError(JetStreamError, TimeoutError):
    """A lock (or an election) was not acquired within its ``timeout``; nothing is held."""

    def __init__(self, key: str, timeout: float) -> None:
        super().__init__(f"lock {key!r} not acquired within {timeout:g}s")
        self.key = key
        self.timeout = timeout


def missing_bucket(js: JetStream, bucket: str) -> MissingStream:
    """The KV layer's one translator of a missing bucket: around any operation on ``bucket``,
    "stream not found" (and a 503 confirmed to mean it) becomes :class:`BucketNotFoundError`
    naming it (see :class:`jetstream._api.missing_stream.MissingStream`)."""
    stream = f"KV_{bucket}"  # as _models.stream_name (importing it here would be circular)
    return MissingStream(js, stream, functools.partial(BucketNotFoundError, bucket))
