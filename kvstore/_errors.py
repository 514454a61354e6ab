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
    └── ClientValidationError    ── InvalidKeyError       a key or key filter breaks the KV rules
"""

from __future__ import annotations

from jetstream import (
    ClientValidationError,
    MessageNotFoundError,
    StreamExistsError,
    StreamNotFoundError,
    WrongLastSequenceError,
)

__all__ = [
    "BucketExistsError",
    "BucketNotFoundError",
    "InvalidKeyError",
    "KeyExistsError",
    "KeyNotFoundError",
    "WrongRevisionError",
]


class BucketNotFoundError(StreamNotFoundError):
    """The KV bucket (its ``KV_<bucket>`` stream) does not exist."""


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
