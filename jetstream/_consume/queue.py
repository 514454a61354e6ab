"""The one-reader queue between a puller and its reader: messages, reset requests, terminal
errors and wake-ups, cheaper per item than asyncio.Queue."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import enum
from typing import TYPE_CHECKING, Final

from .pull_message import PullMessage

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["WAKE", "Item", "ItemQueue", "ResetReason", "ResetSignal", "Wake", "cancel_and_wait"]


class ResetReason(enum.Enum):
    HEARTBEAT = "missed heartbeats"
    RECONNECT = "reconnected"
    DELETED = "consumer deleted"
    NO_RESPONDERS = "consumer not found"
    MEMORY = "more buffered than its memory bound"


@dataclasses.dataclass(frozen=True)
class ResetSignal:
    """Put in the queue instead of a warning/error when the owner recreates consumers."""

    reason: ResetReason


class Wake(enum.Enum):
    """Put in an ordered consumer's queue to wake its reader when something it may wait for
    changed without a message to read (see ``OrderedConsumer.next_message``)."""

    WAKE = "wake"


WAKE: Final = Wake.WAKE

Item = PullMessage | ResetSignal | BaseException | Wake | None
"""What the queue yields: a message, a reset request, a terminal error, a wake-up, or None
(stopped)."""


class ItemQueue:
    """A one-reader queue: a deque plus a wake-up future, cheaper per item than asyncio.Queue
    (this is on the per-message path of every watch).

    ``before_wait`` runs each time a reader is about to wait, never for an item already here:
    the puller checks there that the reader may wait at all (the context open, the reader in
    the context's event loop, else a wait that nothing would ever end)."""

    __slots__ = ("_before_wait", "_items", "_waiter")

    def __init__(self, before_wait: Callable[[], None] = lambda: None) -> None:
        self._items: collections.deque[Item] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._before_wait = before_wait

    def put_nowait(self, item: Item) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def __len__(self) -> int:
        return len(self._items)

    def peek_message(self) -> PullMessage | None:
        """The oldest item if it is a message (left in place), else None."""
        items = self._items
        if items and type(items[0]) is PullMessage:
            return items[0]
        return None

    def drop_oldest(self) -> None:
        """Remove the oldest item (after :meth:`peek_message`)."""
        self._items.popleft()

    def messages(self) -> list[PullMessage]:
        """The messages waiting, oldest first."""
        return [item for item in self._items if type(item) is PullMessage]

    async def get(self, timeout: float | None = None) -> Item:
        """The oldest item, waiting for one; with ``timeout``, TimeoutError after that many
        seconds without one. (A timer handle only while waiting: ``asyncio.wait_for`` would
        wrap every call in a task, which doubled the per-message cost of a scan.)"""
        if not self._items and timeout is not None:
            self._before_wait()
            loop = asyncio.get_running_loop()
            self._waiter = waiter = loop.create_future()
            timer = loop.call_later(timeout, _expire, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
        while not self._items:
            self._before_wait()
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        return self._items.popleft()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


async def cancel_and_wait(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` and wait until it ended. A cancel of the *caller* meanwhile still
    propagates (suppressing CancelledError around ``await task`` would swallow it, and an
    iteration cancelled during a consumer reset then waited for messages forever)."""
    task.cancel()
    await asyncio.wait([task])
