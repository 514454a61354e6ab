"""Letting a member's consumer go after a change of its partitions (orbit's order): the
instance holding the pin deletes it once the server has applied its acks; the others give it
time to."""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Final

from jetstream import Consumer, ConsumerNotFoundError, JetStream, JetStreamError
from jetstream._consume.pull_message import PullMessage

from ._assign import PRIORITY_GROUP
from ._consumer_use import pins

__all__ = ["hand_over", "holds_pin"]

_BACKOFF: Final = (0.4, 0.5)  # orbit: an unpinned instance waits 400-499 ms on a change


async def holds_pin(consumer: Consumer) -> bool:
    """Whether this instance's pin on ``consumer`` is the one the server holds now (False
    when the server cannot say)."""
    pin = consumer.pin_id(PRIORITY_GROUP)
    if not pin:
        return False
    try:
        info = await consumer.info()
    except JetStreamError:
        return False
    return pin in pins(info)


async def hand_over(js: JetStream, consumer: Consumer, last: PullMessage | None) -> None:
    """After a change of partitions: the instance holding the pin deletes the consumer (its
    messages are settled; ``last`` is the last message it received), the others give it time
    to."""
    if await holds_pin(consumer):
        await _acks_applied(last)
        with contextlib.suppress(ConsumerNotFoundError):
            await js.delete_consumer(consumer.stream, consumer.name)
    else:
        await asyncio.sleep(random.uniform(*_BACKOFF))


async def _acks_applied(last: PullMessage | None) -> None:
    """Wait until the consumer has applied the acks sent so far. The server queues acks and
    applies them apart from API requests: a consumer deleted right after an ack could lose
    it, and the work queue would give that message to the next owner of its partition
    although it was processed (orbit's "ack racing a membership change"). A confirmed
    ``+WPI`` on the last message received is answered only after every ack sent before it on
    this connection."""
    if last is not None:
        with contextlib.suppress(JetStreamError):  # no answer: delete anyway (bounded)
            await last.in_progress(wait=True)
