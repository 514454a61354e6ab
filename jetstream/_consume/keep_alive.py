"""Keeping a consume's buffered messages from timing out (``consume(keep_buffered=True)``),
as pure state: no I/O, no clock of its own (callers pass ``now``).

The server starts a message's ``ack_wait`` when it sends it. A message that waits in the
consume's buffer behind a slow callback uses up that time before the callback even sees it;
once it has run out the server delivers the message again, and the callback processes it
twice (the copy arrives behind newer messages, each of which then waits too: one late ack
made every later message of a ``max_ack_pending=1`` consumer run twice). So a waiting
message gets an in-progress (``+WPI``, which restarts its ``ack_wait``) before half of it has
passed, and a message handed out after waiting more than a twentieth of it gets one first:
the callback always has at least 95% of ``ack_wait`` from its start. Messages that are taken
at once, the usual case, cost nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from .pull_message import PullMessage

__all__ = ["HANDOUT_SHARE", "BufferKeepAlive"]

HANDOUT_SHARE: Final = 0.05
"""A message handed out older than this share of ``ack_wait`` is refreshed first."""


class BufferKeepAlive:
    """When a consume's buffered messages need an in-progress, for a consumer whose messages
    time out after ``ack_wait`` seconds (the shortest of its ``ack_wait`` and ``backoff``)."""

    __slots__ = ("every", "fresh")

    def __init__(self, ack_wait: float) -> None:
        self.every = ack_wait / 2
        """A waiting message is refreshed at least this often (seconds)."""
        self.fresh = ack_wait * HANDOUT_SHARE

    def due(self, messages: Iterable[PullMessage], now: float) -> list[PullMessage]:
        """The messages to refresh at a check at ``now``: those that have waited half of
        :attr:`every` (taking them with the ones due now spares a wake-up soon after)."""
        limit = now - self.every / 2
        return [m for m in messages if m.refreshed_at <= limit]

    def next_check(self, messages: Iterable[PullMessage]) -> float | None:
        """When to check next: when the oldest of ``messages`` will have waited
        :attr:`every` (None: nothing waits)."""
        oldest = min((m.refreshed_at for m in messages), default=None)
        return None if oldest is None else oldest + self.every

    def stale(self, message: PullMessage, now: float) -> bool:
        """Whether ``message``, handed out at ``now``, must be refreshed first."""
        return now - message.refreshed_at > self.fresh
