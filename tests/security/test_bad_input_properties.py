"""Property-based: every public API refuses every bad key, TTL or header value before anything
reaches the server (a spy subscription on the bucket's and store's subjects proves it)."""

from __future__ import annotations

import re
import string
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jetstream
import kvstore
import objstore
from jetstream._options import run_sync

# The reference rule (nats.go kv.go), independent of our implementation.
_VALID_KEY = re.compile(r"[-/_=.a-zA-Z0-9]+")


def _valid_key(key: str) -> bool:
    return bool(_VALID_KEY.fullmatch(key)) and not (
        key.startswith(".") or key.endswith(".") or ".." in key
    )


BAD_KEYS = st.text(alphabet=string.printable + "éß\u00a0\u2028*>", max_size=12).filter(
    lambda k: not _valid_key(k)
)
BAD_TTLS = st.one_of(
    st.integers(max_value=0),
    st.floats(min_value=0, max_value=0.999, allow_nan=False),
    st.floats(min_value=1.001, max_value=1.999),
    st.text(alphabet="abcxyz !@#-.", min_size=1, max_size=6),
)
BAD_HEADER_VALUES = st.text(max_size=10).map(lambda t: t + "\r\n" + t)

KEY_CALLS: list[Callable[[kvstore.Bucket, str], Awaitable[Any]]] = [
    lambda b, k: b.put(k, b"v"),
    lambda b, k: b.create(k, b"v"),
    lambda b, k: b.update(k, b"v", 1),
    lambda b, k: b.delete(k),
    lambda b, k: b.purge(k),
    lambda b, k: b.get(k),
    lambda b, k: b.put_many({"fine": b"1", k: b"2"}),
    lambda b, k: b.get_many(["fine", k]),
]
TTL_CALLS: list[Callable[[kvstore.Bucket, Any], Awaitable[Any]]] = [
    lambda b, t: b.put("k", b"v", ttl=t),
    lambda b, t: b.create("k", b"v", ttl=t),
    lambda b, t: b.put_many({"k": b"v"}, ttl=t),
    lambda b, t: b.purge("k", ttl=t),
]


async def _nothing_sent(url: str, act: Callable[[jetstream.JetStream], Awaitable[None]]) -> None:
    async with await jetstream.connect(url) as spy, await jetstream.connect(url) as js:
        seen: list[str] = []

        async def record(msg: Any) -> None:
            seen.append(msg.subject)

        await spy.nc.subscribe("$KV.props.>", cb=record)
        await spy.nc.subscribe("$O.props.>", cb=record)
        await spy.nc.flush()
        await act(js)
        await js.nc.flush()
        await spy.nc.flush()
        assert seen == []


@pytest.fixture(scope="module")
def url(nats_server: jetstream.EmbeddedServer) -> str:
    async def create() -> None:
        async with await jetstream.connect(nats_server.url) as js:
            await kvstore.create_bucket(js, "props", history=5)
            await objstore.create_store(js, "props")

    run_sync(create)
    return nats_server.url


PROPERTY = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY
@given(key=BAD_KEYS)
def test_bad_keys_never_reach_the_server(url: str, key: str) -> None:
    async def act(js: jetstream.JetStream) -> None:
        bucket = await kvstore.open_bucket(js, "props")
        for call in KEY_CALLS:
            with pytest.raises(kvstore.InvalidKeyError):
                await call(bucket, key)
        if not re.fullmatch(r"[-/_=.a-zA-Z0-9*>]*", key):  # "*" or "a.>" are fine filters
            with pytest.raises(kvstore.InvalidKeyError):
                bucket.watch(key)
        with pytest.raises(kvstore.InvalidKeyError):
            bucket.history(key)

    run_sync(lambda: _nothing_sent(url, act))


@PROPERTY
@given(ttl=BAD_TTLS)
def test_bad_ttls_never_reach_the_server(url: str, ttl: Any) -> None:
    async def act(js: jetstream.JetStream) -> None:
        bucket = await kvstore.open_bucket(js, "props")
        for call in TTL_CALLS:
            with pytest.raises(jetstream.InvalidTTLError):
                await call(bucket, ttl)
        store = await objstore.open_store(js, "props")
        with pytest.raises(jetstream.InvalidTTLError):
            await store.put("x", b"data", ttl=ttl)

    run_sync(lambda: _nothing_sent(url, act))


@PROPERTY
@given(value=BAD_HEADER_VALUES, name=st.text(alphabet=" :\t\r\n", min_size=1, max_size=3))
def test_bad_headers_and_names_never_reach_the_server(url: str, value: str, name: str) -> None:
    async def act(js: jetstream.JetStream) -> None:
        batch = jetstream.AtomicBatch(js)
        with pytest.raises(jetstream.InvalidHeaderError):
            batch.add("$KV.props.k", b"v", {"X-App": value})
        with pytest.raises(jetstream.InvalidHeaderError):
            batch.add("$KV.props.k", b"v", {f"X{name}": "v"})
        with pytest.raises(jetstream.InvalidHeaderError):
            batch.add("$KV.props.k", b"v", {"Nats-Batch-Id": "forged"})
        await batch.commit()  # empty: nothing to send
        store = await objstore.open_store(js, "props")
        with pytest.raises(jetstream.ClientValidationError):
            await store.put("x", b"data", headers={"X-App": [value], name: ["v"]}, meta={"k": 1})  # type: ignore[dict-item]

    run_sync(lambda: _nothing_sent(url, act))
