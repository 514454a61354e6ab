"""The fence behind every retried write: ``JetStream.publish`` and ``AtomicBatch`` share it.

A write carrying a ``Nats-Msg-Id`` may be sent again after an answer that leaves its outcome
unknown (a lost ack, "an earlier send of this id is in flight", an abandon after a leader
change): the server refuses the repeat as a duplicate, or the repeat fails its expected-sequence
check because the first attempt moved the sequence on. Only then, when a *retry* is refused and an
earlier attempt may have been stored, is a lookup by message id worth its cost (a stream lookup and
a scan of the subject's history). A refusal of a first attempt is definite and costs nothing more:
an optimistic-concurrency loop (locks, counters) pays one round trip per conflict.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from .._errors import BatchAbandonedError, MessageIdInProcessError, RequestTimeoutError

__all__ = ["AMBIGUOUS", "Fence"]

T = TypeVar("T")

AMBIGUOUS = (RequestTimeoutError, MessageIdInProcessError, BatchAbandonedError)
"""Answers after which an attempt that left may still have been stored (no reply; 10158: an
earlier send of the id is still in flight; 10176: a leader change can abandon a batch that a
quorum already stored)."""


class Fence:
    """The attempts of one fenced write: how many were sent, and whether one may be stored.

    Call :meth:`attempt` before each send and :meth:`failed` with what each failed attempt
    raised; on a definite refusal call :meth:`settle` to learn whether an earlier attempt was
    stored after all.
    """

    __slots__ = ("attempts", "in_doubt", "msg_id")

    def __init__(self, msg_id: str) -> None:
        self.msg_id = msg_id
        """The ``Nats-Msg-Id`` every attempt carries."""
        self.attempts = 0
        """Attempts started so far."""
        self.in_doubt = False
        """True once an attempt that left ended without a definite answer."""

    @property
    def retried(self) -> bool:
        """Whether the current attempt is a repeat (a refusal may then be our own echo)."""
        return self.attempts > 1

    def attempt(self) -> int:
        """Count an attempt about to be sent; return its number (1 for the first)."""
        self.attempts += 1
        return self.attempts

    def failed(self, error: BaseException, *, left: bool = True) -> None:
        """Note how an attempt failed. ``left`` is False when the write never left the client
        (then nothing can have been stored, whatever the error)."""
        if left and isinstance(error, AMBIGUOUS):
            self.in_doubt = True

    async def settle(self, lookup: Callable[[], Awaitable[T | None]]) -> T | None:
        """After a definite refusal: what an earlier attempt stored, found by ``lookup``, or
        None when no earlier attempt may have been stored (the refusal then stands; no request
        is made).

        Raises:
            Whatever ``lookup`` raises.
        """
        if not (self.in_doubt and self.retried):
            return None
        return await lookup()
