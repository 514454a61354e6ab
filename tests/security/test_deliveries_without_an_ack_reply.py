"""A message published straight into a reader's pull inbox by a peer allowed to publish there
(no permissions, or permissions wider than the templates'): its reply subject is no
JetStream ack reply, so it is no delivery of the consumer. It must be dropped or reported as
a typed error, never end a watch with a raw ``ValueError`` from ``parse_ack_reply``."""

from __future__ import annotations

import asyncio

import pytest
from nats.js import JetStreamContext

import jetstream
import kvstore

pytestmark = pytest.mark.integration
DEADLINE = 20  # a guard against hanging, never a measurement


async def test_a_message_in_a_watchs_inbox_without_an_ack_reply_is_no_raw_error(
    bucket: kvstore.Bucket, peer: JetStreamContext
) -> None:
    nc = peer._nc
    pulls = await nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{bucket.stream}.>")  # sees the inbox
    await bucket.put("a", b"1")
    async with asyncio.timeout(DEADLINE), bucket.watch() as watcher:
        assert (await anext(watcher)).key == "a"
        pull = await pulls.next_msg(timeout=DEADLINE)
        await nc.publish(pull.reply, b"forged", reply="not.an.ack")
        await nc.flush()
        await bucket.put("b", b"2")
        try:
            entry = await anext(watcher)
        except jetstream.JetStreamError:
            return  # a typed end is acceptable
        assert entry.key == "b"
