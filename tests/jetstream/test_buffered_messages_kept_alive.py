"""When a consume's buffered messages get an in-progress (``consume(keep_buffered=True)``):
none waits longer than half of ``ack_wait`` without one, messages taken at once never get
one, and a message handed out after waiting more than 5% of ``ack_wait`` gets one first."""

from __future__ import annotations

import random

from jetstream._consume.keep_alive import BufferKeepAlive
from jetstream._consume.pull_message import PullMessage
from jetstream._consume.queue import ItemQueue

ACK_WAIT = 2.0


def message(received: float) -> PullMessage:
    msg = PullMessage("s", "r", b"", {}, 0, None)  # type: ignore[arg-type]
    msg.refreshed_at = received
    return msg


def test_nothing_buffered_needs_no_check() -> None:
    assert BufferKeepAlive(ACK_WAIT).next_check([]) is None


def test_the_oldest_message_sets_the_next_check_at_half_ack_wait() -> None:
    keeper = BufferKeepAlive(ACK_WAIT)
    assert keeper.next_check([message(10.0), message(9.5), message(10.2)]) == 9.5 + ACK_WAIT / 2


def test_a_check_refreshes_what_has_waited_a_quarter_of_ack_wait() -> None:
    keeper = BufferKeepAlive(ACK_WAIT)
    old, middle, fresh = message(9.0), message(9.5), message(9.9)
    assert keeper.due([old, middle, fresh], now=10.0) == [old, middle]


def test_a_message_handed_out_after_waiting_over_5_percent_is_refreshed_first() -> None:
    keeper = BufferKeepAlive(ACK_WAIT)
    assert not keeper.stale(message(10.0), now=10.0 + 0.05 * ACK_WAIT)
    assert keeper.stale(message(10.0), now=10.01 + 0.05 * ACK_WAIT)


def test_no_buffered_message_waits_half_of_ack_wait_without_a_refresh() -> None:
    """Messages arrive at random and are taken at random; the checks run when
    ``next_check`` says (a new message into an empty buffer makes the watch look again):
    at every moment each buffered message was refreshed within ``ack_wait / 2``."""
    rng = random.Random(7)
    keeper = BufferKeepAlive(ACK_WAIT)
    queue = ItemQueue()
    now, check, refreshes, arrivals = 0.0, None, 0, 0
    while now < 600:
        event = now + rng.expovariate(4.0)  # the next arrival or take
        if check is not None and check <= event:  # the watch wakes (a little late, as a loop is)
            now = check + rng.uniform(0, 0.01)
            for msg in keeper.due(queue.messages(), now):
                msg.refreshed_at = now
                refreshes += 1
        else:
            now = event
            if rng.random() < 0.5:
                queue.put_nowait(message(now))
                arrivals += 1
            elif queue.peek_message() is not None:
                queue.drop_oldest()
        check = keeper.next_check(queue.messages())
        for msg in queue.messages():
            assert now - msg.refreshed_at <= ACK_WAIT / 2 + 0.01
    assert refreshes > 0 and arrivals > 1000


def test_messages_taken_at_once_are_never_refreshed() -> None:
    keeper = BufferKeepAlive(ACK_WAIT)
    for t in range(1000):
        msg = message(t * 0.01)
        assert keeper.due([msg], now=t * 0.01 + 0.001) == []
        assert not keeper.stale(msg, now=t * 0.01 + 0.001)
