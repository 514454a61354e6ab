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


async def test_acks_before_the_barrier_survive_a_consumer_delete(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    """The hand over of a group member: ack, then delete the consumer of a work queue. Acks
    are applied apart from API requests: without the barrier the delete overtook them in 37
    of 40 trials (the work queue kept acknowledged messages for the next consumer); with it,
    nothing acknowledged is left in any trial."""
    name = unique_name("wpq")
    await js.add_stream(
        jetstream.StreamConfig(name=name, subjects=[f"{name}.>"], retention="workqueue")
    )
    try:
        for _ in range(20):
            for i in range(100):
                await js.publish(f"{name}.x", str(i).encode())
            await js.create_consumer_info(
                name, jetstream.ConsumerConfig(durable_name="c", ack_policy="explicit")
            )
            consumer = await js.consumer(name, "c")
            batch = [m async for m in consumer.fetch(100, expires=2)]
            for msg in batch:
                await msg.ack()
            await batch[-1].in_progress(wait=True)
            await js.delete_consumer(name, "c")
            assert (await js.stream_info(name)).state.messages == 0
    finally:
        await js.delete_stream(name)


@pytest.mark.parametrize("settle", ["ack", "term"])
async def test_a_confirmed_ack_returns_once_the_server_has_applied_it(
    js: jetstream.JetStream, unique_name: Callable[[str], str], settle: str
) -> None:
    """``ack(wait=True)`` / ``term(wait=True)`` (a group member's ``confirm_acks``): when it
    returns, the work queue has removed the message, so a crash of the server cannot bring it
    back; a plain ack is only queued (stream info right after it still counted the message
    in 31-46 of 50)."""
    name = unique_name("ackw")
    await js.add_stream(
        jetstream.StreamConfig(name=name, subjects=[f"{name}.>"], retention="workqueue")
    )
    try:
        for i in range(50):
            await js.publish(f"{name}.x", str(i).encode())
        await js.create_consumer_info(
            name, jetstream.ConsumerConfig(durable_name="c", ack_policy="explicit")
        )
        consumer = await js.consumer(name, "c")
        for left in range(49, -1, -1):
            (msg,) = [m async for m in consumer.fetch(1, expires=2)]
            await getattr(msg, settle)(wait=True)
            assert (await js.stream_info(name)).state.messages == left
    finally:
        await js.delete_stream(name)
