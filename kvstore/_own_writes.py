"""What one bucket handle wrote: the floor its own reads must not fall below.

Direct gets are answered by any replica, and a follower may answer before it has applied a
write this handle already saw acknowledged (ADR-8 promises no read-after-write). Remembering
the revision of each key written here lets a read detect such an answer and ask the stream
leader instead, so a handle always reads its own writes.
"""

from __future__ import annotations

from collections import OrderedDict

REMEMBERED_KEYS = 16_384
"""Keys remembered per handle (a bounded LRU, about 1.5 MB at most). Replicas trail the
leader by milliseconds, so a write that has left the window is long since everywhere."""


class OwnWrites:
    """The newest revision this handle wrote, per key and overall."""

    __slots__ = ("_keys", "latest")

    def __init__(self) -> None:
        self._keys: OrderedDict[str, int] = OrderedDict()
        self.latest = 0
        """The highest revision written through this handle (0: none)."""

    def note(self, key: str, revision: int) -> None:
        """Record that ``key`` was written at ``revision`` (acknowledged by the server)."""
        if revision > self._keys.get(key, 0):
            self._keys[key] = revision
        self._keys.move_to_end(key)
        if len(self._keys) > REMEMBERED_KEYS:
            self._keys.popitem(last=False)
        self.latest = max(self.latest, revision)

    def revision(self, key: str) -> int:
        """The newest revision of ``key`` written here, or 0 when none is remembered."""
        return self._keys.get(key, 0)
