"""update_store: a store's settings change in place, its objects and unmodelled settings stay,
and bad input or a missing store are typed errors with nothing changed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

import jetstream
import objstore
from tests.conftest import StoreFactory


async def test_given_fields_change_and_the_rest_stay(
    js: jetstream.JetStream, make_store: StoreFactory
) -> None:
    store = await make_store(description="before", max_bytes=10_000_000, metadata={"team": "a"})
    await store.put("kept", b"payload")
    updated = await objstore.update_store(
        js,
        store.name,
        description="after",
        max_age=timedelta(days=7),
        compression=True,
        metadata={"team": "b"},
    )
    config = (await updated.status()).config
    assert config.description == "after"
    assert config.max_age == timedelta(days=7)
    assert config.compression is True
    assert config.metadata == {"team": "b"}
    assert config.max_bytes == 10_000_000  # not given: kept
    info = (await js.stream_info(store.stream)).config
    assert info.allow_batched and info.allow_direct and info.allow_msg_ttl  # not modelled: kept
    assert await updated.get_bytes("kept") == b"payload"
    await updated.put("new", b"x")  # uploads go on (fast ingest) after the update


async def test_a_config_replaces_the_settings(
    js: jetstream.JetStream, make_store: StoreFactory
) -> None:
    store = await make_store(description="before")
    new = objstore.StoreConfig(max_bytes=5_000_000, marker_ttl=timedelta(seconds=5))
    updated = await objstore.update_store(js, store.name, new)
    config = (await updated.status()).config
    assert (config.description, config.max_bytes) == ("", 5_000_000)
    assert config.marker_ttl == timedelta(seconds=5)
    with pytest.raises(jetstream.InvalidTTLError):
        await updated.put("short", b"x", ttl=2)  # below the new marker_ttl: refused


async def test_bad_input_and_a_missing_store_change_nothing(
    js: jetstream.JetStream, make_store: StoreFactory, unique_name: Callable[[str], str]
) -> None:
    store = await make_store(description="before")
    with pytest.raises(jetstream.InvalidBucketConfigError):
        await objstore.update_store(js, store.name, replicas=0)
    with pytest.raises(jetstream.InvalidBucketNameError):
        await objstore.update_store(js, "bad.name", description="x")
    absent = unique_name("none")
    with pytest.raises(objstore.StoreNotFoundError) as missing:
        await objstore.update_store(js, absent, description="x")
    assert missing.value.store == absent
    with pytest.raises(jetstream.InvalidStreamConfigError):
        await objstore.update_store(js, store.name, storage="memory")  # the server refuses
    assert (await store.status()).config.description == "before"
