"""A member's handler that gives a message back (``nak()``, or raising): with
``max_ack_pending`` 1 the message given back is processed again before the newer ones of its
key. (With more, the server has already sent the member newer messages of the key, and they
come first: the README says so and names ``max_ack_pending=1`` for order after a nak.)"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

import jetstream
import pcgroups
from tests.pcgroups.group_streams import one_member_group

pytestmark = pytest.mark.integration
MESSAGES = 6  # of one key; message 1 is given back once
DEADLINE = 30.0


@pytest.mark.parametrize("give_back", ["nak", "raise"])
@pytest.mark.parametrize("kind", ["static", "elastic"])
async def test_a_message_given_back_is_processed_again_before_newer_ones_of_its_key(
    js: jetstream.JetStream, unique_name: Callable[[str], str], kind: str, give_back: str
) -> None:
    consume = pcgroups.consume_static if kind == "static" else pcgroups.consume_elastic
    async with one_member_group(js, unique_name("pko"), kind) as stream:
        for n in range(MESSAGES):
            await js.publish(f"{stream}.k0", str(n).encode())
        processed: list[int] = []
        all_done = asyncio.Event()

        async def handle(msg: pcgroups.GroupMessage) -> None:
            n = int(msg.data)
            processed.append(n)
            if n == 1 and processed.count(1) == 1:
                if give_back == "nak":
                    await msg.nak()
                    return
                raise RuntimeError("the handler failed")  # redelivered after ack_wait
            await msg.ack()
            if set(processed) == set(range(MESSAGES)) and processed.count(1) == 2:
                all_done.set()

        config = jetstream.ConsumerConfig(ack_wait=1, max_ack_pending=1)  # type: ignore[arg-type]
        async with consume(js, stream, "g", "m1", handle, config=config):
            await asyncio.wait_for(all_done.wait(), DEADLINE)
        assert processed == [0, 1, 1, 2, 3, 4, 5]
