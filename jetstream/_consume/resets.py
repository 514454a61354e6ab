"""When an ordered consumer may be recreated, and when it must give up (ADR-37: never storm).

A reset recreates the consumer after the last delivered stream sequence. One that comes soon
after the previous consumer was created, with nothing delivered in between, is a reset *in
place*: something at that sequence keeps failing. Resets in place wait with growing backoff;
after :data:`MAX_RESETS_IN_PLACE` of them caused by what the server delivered (a sequence gap,
messages it sits on), the consumer gives up with a typed error instead of asking for a new
consumer again and again (each reset is two API requests: one reader once sent 2,400 a second).
Resets caused by the connection (missed heartbeats, a reconnect, the consumer deleted) back off
the same way but never give up: a watch outlives any outage.
"""

from __future__ import annotations

import math
import random
from typing import Final

__all__ = ["MAX_RESETS_IN_PLACE", "ResetGuard", "reset_backoff"]

MAX_RESETS_IN_PLACE: Final = 10
"""Resets in place caused by deliveries before giving up (about 30 s of backoff in all)."""


def reset_backoff(attempt: int) -> float:
    """Seconds before re-creating an ordered consumer after ``attempt`` failures: doubling from
    0.5 s up to 5 s, each drawn at random from its upper half, so that the watches of many
    clients that lost the same server do not retry in lockstep."""
    ceiling = min(0.25 * 2**attempt, 5.0)
    return random.uniform(ceiling / 2, ceiling)


class ResetGuard:
    """Pure state (callers pass ``now``): how long to wait before the next recreation.

    ``window``: a consumer replaced within this many seconds of its creation, with the last
    delivered sequence unchanged, got nowhere (a healthy consumer that later loses its
    connection is not a loop, whatever its sequence).
    """

    def __init__(self, window: float, limit: int = MAX_RESETS_IN_PLACE) -> None:
        self._window = window
        self._limit = limit
        self._seq = -1  # the last delivered sequence at the previous reset
        self._created = -math.inf  # when the current consumer was created
        self._in_place = 0  # resets in place in a row
        self._stuck = 0  # ... of them caused by deliveries

    def created(self, now: float) -> None:
        """A consumer was created at ``now``."""
        self._created = now

    def reset(self, seq: int, now: float, *, delivery: bool) -> float | None:
        """Seconds to wait before recreating after a reset at ``seq`` (the last delivered
        stream sequence): 0 unless it is a reset in place; None to give up (``delivery``: the
        reset was caused by what the server delivered, and the limit is reached)."""
        if seq != self._seq or now - self._created >= self._window:
            self._seq, self._in_place, self._stuck = seq, 0, 0
            return 0.0
        self._in_place += 1
        if delivery:
            self._stuck += 1
            if self._stuck >= self._limit:
                return None
        return reset_backoff(self._in_place)

    @property
    def in_place(self) -> int:
        """Resets in place in a row so far."""
        return self._in_place
