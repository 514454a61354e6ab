"""A ``str`` holding a lone surrogate (what ``json.loads('"\\ud800"')`` or a
``surrogateescape`` decode give) is no text UTF-8 can carry: every call that takes text refuses
it with a typed error before anything is sent, instead of a raw ``UnicodeEncodeError``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import jetstream
import kvstore
import objstore
import pcgroups

pytestmark = pytest.mark.integration

LONE = "\ud800"

World = dict[str, Any]
CALLS: dict[str, Callable[[World], Awaitable[Any]]] = {
    "bucket description": lambda w: kvstore.create_bucket(w["js"], "nb", description=LONE),
    "store description": lambda w: objstore.create_store(w["js"], "ns", description=LONE),
    "store metadata": lambda w: objstore.create_store(w["js"], "ns", metadata={"a": LONE}),
    "object name": lambda w: w["store"].put("n" + LONE, b"x"),
    "object meta": lambda w: w["store"].put("n", b"x", meta={"k": LONE}),
    "object meta key": lambda w: w["store"].put("n", b"x", meta={LONE: "v"}),
    "object description": lambda w: w["store"].put("n", b"x", description=LONE),
    "object headers": lambda w: w["store"].put("n", b"x", headers={"X": [LONE]}),
    "meta update": lambda w: w["store"].update_meta("o", description=LONE),
    "link name": lambda w: w["store"].add_link(LONE, "o"),
    "object info": lambda w: w["store"].info(LONE),
    "key": lambda w: w["bucket"].put("k" + LONE, b"x"),
    "watch filter": lambda w: w["bucket"].watch("k" + LONE).__aenter__(),
    "stream subject": lambda w: w["js"].add_stream(
        jetstream.StreamConfig(name="NS", subjects=["x." + LONE])
    ),
    "consumer name": lambda w: w["js"].create_consumer(
        w["bucket"].stream, jetstream.ConsumerConfig(durable_name="c" + LONE)
    ),
    "publish subject": lambda w: w["js"].publish("x." + LONE, b"v"),
    "publish header": lambda w: w["js"].publish(
        f"$KV.{w['bucket'].name}.k", b"v", headers={"X": LONE}
    ),
    "static group member": lambda w: pcgroups.create_static(
        w["js"], w["bucket"].stream, "g", max_members=2, members=["m" + LONE]
    ),
}


@pytest.mark.parametrize("call", sorted(CALLS))
async def test_a_lone_surrogate_is_refused_before_anything_is_sent(
    js: jetstream.JetStream,
    bucket: kvstore.Bucket,
    store: objstore.ObjectStore,
    call: str,
) -> None:
    await store.put("o", b"x")
    messages = (await js.stream_info(bucket.stream)).state.messages
    before = (await js.account_info()).api
    with pytest.raises(jetstream.ClientValidationError):
        await CALLS[call]({"js": js, "bucket": bucket, "store": store})
    after = (await js.account_info()).api
    assert (after.total - before.total, after.errors) == (1, before.errors)  # the info only
    assert (await js.stream_info(bucket.stream)).state.messages == messages
    assert [i.name async for i in store.list()] == ["o"]
