"""Making a member's pinned instance step down without a second instance working on its keys.

Unpinning alone is not enough: the stepped-down instance still holds the messages the server
delivered to it (up to ``max_ack_pending``; the server's default is 1,000) and works through
them, while the next pull of another instance is pinned and receives the newer messages of
the same keys: two instances on one key at once, out of order. So the consumer's deliveries
are paused first, the pinned instance finishes what it holds (its acks bring
``num_ack_pending`` to 0), and only then is the pin released and the consumer resumed: the
next instance starts after the last message the old one acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Final

from jetstream import JetStream, JetStreamError

from ._assign import PRIORITY_GROUP
from ._consumer_use import ack_wait_of, pins, server_now

__all__ = ["step_down"]

_LOOK_EVERY: Final = 0.05  # seconds between looks at num_ack_pending, doubling up to
_LOOK_AT_MOST: Final = 0.5


async def step_down(js: JetStream, stream: str, consumer: str) -> None:
    """Unpin ``consumer``'s priority group once the pinned instance has settled what it
    holds: its deliveries are paused meanwhile. The wait lasts while the instance makes
    progress (an ack at least every ``ack_wait``); without, the pin is released anyway (what
    it holds comes again after ``ack_wait``, as from an instance that died). A consumer
    nobody holds the pin of, or that is paused already, is unpinned at once.

    Raises:
        ConsumerNotFoundError: no such consumer.
        JetStreamError: the server refused or did not answer.
    """
    info = await js.consumer_info(stream, consumer)
    if info.paused or not pins(info):
        await js.unpin_consumer(stream, consumer, PRIORITY_GROUP)
        return
    ack_wait = ack_wait_of(info)
    hold = 2 * ack_wait  # the pause ends by itself if we die meanwhile
    await js.pause_consumer(stream, consumer, server_now(info) + hold)
    try:
        await _until_settled(js, stream, consumer, ack_wait, hold)
        await js.unpin_consumer(stream, consumer, PRIORITY_GROUP)
    finally:
        with contextlib.suppress(JetStreamError):
            await js.pause_consumer(stream, consumer, None)


async def _until_settled(
    js: JetStream, stream: str, consumer: str, ack_wait: timedelta, hold: timedelta
) -> None:
    """Wait until the consumer has no unacknowledged message, or none was acknowledged for
    ``ack_wait``; the pause is extended while acks come."""
    loop = asyncio.get_running_loop()
    pending, progress_at, paused_at = None, loop.time(), loop.time()
    every = _LOOK_EVERY
    while True:
        info = await js.consumer_info(stream, consumer)
        if not info.num_ack_pending:
            return
        now = loop.time()
        if pending is None or info.num_ack_pending < pending:
            progress_at = now
        elif now - progress_at >= ack_wait.total_seconds():
            return
        pending = info.num_ack_pending
        if now - paused_at >= hold.total_seconds() / 2:
            await js.pause_consumer(stream, consumer, server_now(info) + hold)
            paused_at = now
        await asyncio.sleep(every)
        every = min(every * 2, _LOOK_AT_MOST)
