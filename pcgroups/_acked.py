"""The messages a member has acknowledged lately, so that one the server delivers again is
not handed to the handler a second time.

A server that crashes loses the acknowledgements it applied in its last moments: on one
server a consumer's state reaches the disk up to about 0.1 s after a change (nats-server's
consumer store writes it at most ten times a second), and an ack read but not yet applied is
lost on any server. After the restart those messages are delivered again, often with
``delivered`` 1, so a handler cannot tell. The member that acknowledged them recognises them
by their stream sequence and time (a stream deleted and made again under the same name
reuses sequences, never times) and acknowledges them again instead.
"""

from __future__ import annotations

from collections import deque
from typing import Final

from jetstream._consume.pull_message import PullMessage
from jetstream._protocol.message import stored_message_id

__all__ = ["REMEMBERED_ACKS", "AckedMessages"]

REMEMBERED_ACKS: Final = 1024
"""How many acknowledged messages a member remembers: a server crash loses about 0.1 s of
acknowledgements, and a member acknowledges at most a few thousand messages a second."""


def _identity(msg: PullMessage) -> str | None:
    try:
        return stored_message_id(msg.reply)
    except ValueError:  # not a JetStream delivery: nothing to recognise it by
        return None


class AckedMessages:
    """The ``size`` messages acknowledged (or terminated) most recently. About 1 µs a
    message (a set and a deque of short strings: nothing for the garbage collector)."""

    def __init__(self, size: int = REMEMBERED_ACKS) -> None:
        self._size = size
        self._seen: set[str] = set()
        self._order: deque[str] = deque()

    def add(self, msg: PullMessage) -> None:
        """Remember ``msg`` as settled for good; the oldest one is forgotten beyond ``size``."""
        identity = _identity(msg)
        if identity is None or identity in self._seen:
            return
        self._seen.add(identity)
        self._order.append(identity)
        if len(self._order) > self._size:
            self._seen.discard(self._order.popleft())

    def __contains__(self, msg: PullMessage) -> bool:
        identity = _identity(msg)
        return identity is not None and identity in self._seen
