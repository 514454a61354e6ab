"""The value pipeline's seam: transforms applied to stored values between the bytes API and
the wire (client-side encryption plugs in here).

Order on a write: typed view (``T`` -> bytes) -> value stages, first to last -> publish. On a
read: stored bytes -> value stages, last to first -> typed view. Keys go through the key codec
before anything else, so a stage sees the stored key (the subject's key part). Tombstones
(``KV-Operation`` headers), server markers and headers-only deliveries bypass the stages, so
peers keep reading them.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import msgspec

__all__ = ["ValueContext", "ValueStage"]


class ValueContext(msgspec.Struct, frozen=True):
    """What a stage may bind a value to."""

    bucket: str
    key: str
    """The stored key (after the key codec)."""
    headers: dict[str, str]
    """On a write, the headers about to be sent (a stage may add its own, e.g. a key id); on
    a read, the stored headers."""
    revision: int | None = None
    """On a read, the revision being decoded; None on a write."""


@runtime_checkable
class ValueStage(Protocol):
    """A reversible transform of stored values. ``seal`` runs before a value is sent,
    ``open`` after it is read; ``open`` raises a :class:`jetstream.JetStreamError` subclass
    for a value it cannot open (never a dependency's error)."""

    def seal(self, value: bytes, context: ValueContext) -> bytes: ...

    def open(self, value: bytes, context: ValueContext) -> bytes: ...
