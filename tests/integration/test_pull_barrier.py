"""A confirmed in-progress (``in_progress(wait=True)``) is answered even for a message already
acknowledged, once the consumer has applied the acks sent before it: the barrier a group
member uses before deleting its consumer on a hand over."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import jetstream

pytestmark = pytest.mark.integration


async def test_a_confirmed_in_progress_follows_the_acks_sent_before_it(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("wpi")
    await js.add_stream(jetstream.StreamConfig(name=name, subjects=[f"{name}.>"]))
    try:
        for i in range(50):
            await js.publish(f"{name}.x", str(i).encode())
        await js.create_consumer_info(
            name, jetstream.ConsumerConfig(durable_name="c", ack_policy="explicit")
        )
        consumer = await js.consumer(name, "c")
        batch = [m async for m in consumer.fetch(50, expires=2)]
        assert len(batch) == 50
        for msg in batch:
            await msg.ack()  # not confirmed: queued by the server
        await batch[-1].in_progress(wait=True)  # answered although batch[-1] is acked
        info = await consumer.info()
        assert info.num_ack_pending == 0  # every ack before it is applied
        assert info.ack_floor.stream_seq == 50
    finally:
        await js.delete_stream(name)
