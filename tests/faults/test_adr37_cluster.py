"""ADR-37 on a cluster: consume rides out consumer leader changes (the server drops the waiting
pulls of the old leader: 409 Leadership Change, or silence) without ending or losing messages."""

from __future__ import annotations

import asyncio

import pytest

import jetstream
from jetstream import ConsumerConfig, StreamConfig
from jetstream.testing import EmbeddedCluster

pytestmark = pytest.mark.faults


async def test_consume_survives_consumer_leader_stepdowns(
    cluster: EmbeddedCluster,
) -> None:
    async with await cluster.connect(timeout=5.0) as js:
        await js.add_stream(StreamConfig(name="LC", subjects=["LC.>"], num_replicas=3))
        consumer = await js.create_consumer(
            "LC", ConsumerConfig(durable_name="lc", ack_policy="explicit", num_replicas=3)
        )
        warnings: list[jetstream.JetStreamError] = []
        seen: set[int] = set()
        async with consumer.consume(
            max_messages=20, expires=5, error_callback=warnings.append
        ) as messages:
            for step in range(3):
                for i in range(step * 50, step * 50 + 50):
                    await js.publish(f"LC.{i}", b"%d" % i)
                async with asyncio.timeout(60):
                    async for message in messages:
                        seen.add(int(message.data))
                        await message.ack()
                        if len(seen) == step * 50 + 50:
                            break
                reply = await js.nc.request(
                    "$JS.API.CONSUMER.LEADER.STEPDOWN.LC.lc", b"", timeout=5
                )
                assert b'"success":true' in reply.data, reply.data
        assert seen == set(range(150))
        assert messages.error is None, "a leader change never ends consume"
        assert not [w for w in warnings if isinstance(w, jetstream.PullRequestError)], warnings
        await js.delete_stream("LC")
