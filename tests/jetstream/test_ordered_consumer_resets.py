"""An ordered consumer never recreates itself in a loop: when the message after its last
delivered sequence is lost in transit again and again, it backs off more each time and then
gives up with ``ConsumerStuckError`` instead of asking the server for new consumers without
end (ADR-37: never storm)."""

from __future__ import annotations

import asyncio

import pytest

import jetstream
import kvstore
from jetstream._consume import inbox as _inbox
from jetstream._consume import resets as _resets
from jetstream._protocol.message import parse_ack_reply

pytestmark = pytest.mark.integration


async def test_a_message_lost_at_every_try_backs_off_and_ends_with_consumer_stuck(
    js: jetstream.JetStream, bucket: kvstore.Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("a", "b", "c"):
        await bucket.put(key, b"v")
    lost_seq = 2
    on_frame = _inbox.DeliveryInbox._on_frame

    def lose(self: _inbox.DeliveryInbox, subject: bytes, reply: bytes, *rest: bytes | None) -> None:
        if reply and parse_ack_reply(reply.decode()).stream_seq == lost_seq:
            return  # lost in transit, every time: the next one is a gap
        on_frame(self, subject, reply, *rest)  # type: ignore[arg-type]

    waits: list[int] = []

    def backoff(attempt: int) -> float:
        waits.append(attempt)
        return 0.01  # the real backoff would make this test last half a minute

    monkeypatch.setattr(_inbox.DeliveryInbox, "_on_frame", lose)
    monkeypatch.setattr(_resets, "reset_backoff", backoff)
    before = (await js.account_info()).api.total
    async with bucket.watch() as watch:
        assert (await anext(watch)).key == "a"
        with pytest.raises(jetstream.ConsumerStuckError) as stuck:
            async with asyncio.timeout(30):
                await anext(watch)
    assert (stuck.value.stream, stuck.value.seq) == (bucket.stream, 1)
    assert waits == list(range(1, _resets.MAX_RESETS_IN_PLACE))  # growing, then it gave up
    # A create and a delete per reset, not thousands.
    assert (await js.account_info()).api.total - before < 4 * _resets.MAX_RESETS_IN_PLACE
