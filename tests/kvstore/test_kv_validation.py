"""Bad input gets a typed error and nothing reaches the server: a spy subscription on the
bucket's subjects and the stream-create API proves it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import nats
import pytest

import jetstream
import kvstore
from kvstore import Bucket


class Spy:
    """Records every subject published on the bucket and stream-management subjects."""

    def __init__(self, nc: Any) -> None:
        self.nc = nc
        self.subjects: list[str] = []
        self.subscriptions: list[Any] = []

    async def settle(self) -> list[str]:
        """What was seen: after a round trip through the server every message sent to the spy
        before it has arrived; then wait until the callbacks took them all (a fixed grace was
        too short under load: a bucket creation was recorded after the test cleared the log)."""
        await self.nc.flush()
        deadline = asyncio.get_running_loop().time() + 5
        while any(sub.pending_msgs for sub in self.subscriptions):
            assert asyncio.get_running_loop().time() < deadline, "spy callbacks stalled"
            await asyncio.sleep(0.001)
        return self.subjects

    async def clear(self) -> None:
        """Forget what was seen so far (after it has all arrived)."""
        await self.settle()
        self.subjects.clear()


@pytest.fixture
async def spy(nats_server: jetstream.EmbeddedServer) -> AsyncIterator[Spy]:
    nc = await nats.connect(nats_server.url)
    seen = Spy(nc)

    async def record(msg: Any) -> None:
        seen.subjects.append(msg.subject)

    for subject in ("$KV.>", "$JS.API.STREAM.CREATE.>", "$JS.API.STREAM.UPDATE.>"):
        seen.subscriptions.append(await nc.subscribe(subject, cb=record))
    await nc.flush()
    yield seen
    await nc.close()


BAD_KEYS = ["", ".a", "a.", "a..b", "a b", "a.*", "a.>", "ключ"]
BAD_TTLS: list[object] = [0, -1, 0.5, 1.5, "0s", "500ms", "abc", "", timedelta(0), True]

KEY_CALLS: dict[str, Callable[[Bucket, str], Awaitable[object]]] = {
    "put": lambda b, key: b.put(key, b"v"),
    "create": lambda b, key: b.create(key, b"v"),
    "update": lambda b, key: b.update(key, b"v", 1),
    "delete": lambda b, key: b.delete(key),
    "purge": lambda b, key: b.purge(key),
    "get": lambda b, key: b.get(key),
}
TTL_CALLS: dict[str, Callable[[Bucket, Any], Awaitable[object]]] = {
    "put": lambda b, ttl: b.put("k", b"v", ttl=ttl),
    "create": lambda b, ttl: b.create("k", b"v", ttl=ttl),
    "update": lambda b, ttl: b.update("k", b"v", 1, ttl=ttl),
    "purge": lambda b, ttl: b.purge("k", ttl=ttl),
}


@pytest.mark.parametrize("key", BAD_KEYS)
@pytest.mark.parametrize("call", KEY_CALLS)
async def test_bad_keys_are_refused_before_sending(
    bucket: Bucket, spy: Spy, key: str, call: str
) -> None:
    with pytest.raises(kvstore.InvalidKeyError):
        await KEY_CALLS[call](bucket, key)
    assert await spy.settle() == []


@pytest.mark.parametrize("ttl", BAD_TTLS, ids=repr)
@pytest.mark.parametrize("call", TTL_CALLS)
async def test_bad_ttls_are_refused_before_sending(
    bucket: Bucket, spy: Spy, ttl: object, call: str
) -> None:
    with pytest.raises(kvstore.InvalidTTLError):
        await TTL_CALLS[call](bucket, ttl)
    assert await spy.settle() == []


async def test_bad_values_and_revisions_are_refused_before_sending(
    make_bucket: Callable[..., Any], spy: Spy, js: jetstream.JetStream
) -> None:
    bucket = await make_bucket(max_value_size=16)
    await spy.clear()
    with pytest.raises(kvstore.ValueTooLargeError, match="max_value_size"):
        await bucket.put("k", b"x" * 17)
    with pytest.raises(kvstore.ValueTooLargeError, match="max payload"):
        await (await make_bucket()).put("k", b"x" * (js.nc.max_payload + 1))
    await spy.clear()
    with pytest.raises(jetstream.WrongTypeError):
        await bucket.put("k", "a str")  # type: ignore[arg-type]
    with pytest.raises(jetstream.WrongTypeError):
        await bucket.put("k", None)  # type: ignore[arg-type]
    for revision in (0, -1, True, "1"):
        with pytest.raises(jetstream.ClientValidationError):
            await bucket.update("k", b"v", revision)  # type: ignore[arg-type]
    with pytest.raises(jetstream.ClientValidationError):
        await bucket.delete("k", revision=-1)
    with pytest.raises(jetstream.ClientValidationError):
        await bucket.get("k", revision=0)
    assert await spy.settle() == []
    await bucket.put("k", b"x" * 16)  # the limit itself is fine
    assert len(await spy.settle()) == 1


async def test_bad_bucket_names_and_configs_are_refused_before_sending(
    js: jetstream.JetStream, spy: Spy
) -> None:
    for name in ["", "a.b", "a b", "a*", "a>", "x" * 253]:
        with pytest.raises(kvstore.InvalidBucketNameError):
            await kvstore.create_bucket(js, name)
        with pytest.raises(kvstore.InvalidBucketNameError):
            await kvstore.open_bucket(js, name)
        with pytest.raises(kvstore.InvalidBucketNameError):
            await kvstore.delete_bucket(js, name)
    for options in (
        {"history": 0},
        {"history": 65},
        {"marker_ttl": timedelta(milliseconds=500)},
        {"max_age": timedelta(seconds=-1)},
        {"replicas": 7},
        {"max_value_size": 0},
    ):
        with pytest.raises(kvstore.InvalidBucketConfigError):
            await kvstore.create_bucket(js, "fine_name", **options)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await kvstore.create_bucket(js, "fine_name", no_such_option=1)  # type: ignore[call-arg]
    assert await spy.settle() == []
