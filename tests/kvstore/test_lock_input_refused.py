"""Bad lock names, TTLs and timeouts, and buckets that cannot hold a lease, are refused with a
typed error before anything is written."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from nats.js import JetStreamContext
from nats.js.api import StreamConfig

import jetstream
import kvstore
from tests.conftest import BucketFactory


async def _messages(bucket: kvstore.Bucket) -> int:
    return (await bucket.status()).values


@pytest.mark.parametrize("name", ["", "a b", "jobs.*", "jobs.>", ".jobs", "jobs."])
async def test_a_bad_name_is_refused_at_once(bucket: kvstore.Bucket, name: str) -> None:
    with pytest.raises(kvstore.InvalidKeyError):
        bucket.lock(name)
    with pytest.raises(kvstore.InvalidKeyError):
        bucket.election(name)
    assert await _messages(bucket) == 0


@pytest.mark.parametrize(
    ("ttl", "match"),
    [
        ("never", "never"),
        (1, "at least 3s"),
        ("2s", "at least 3s"),
        (0, "TTL"),
        (-5, "TTL"),
        ("soon", "TTL"),
        (True, "TTL"),
    ],
)
async def test_a_ttl_a_lease_cannot_live_on_is_refused_naming_the_minimum(
    bucket: kvstore.Bucket, ttl: Any, match: str
) -> None:
    with pytest.raises(kvstore.InvalidTTLError, match=match):
        bucket.lock("jobs.nightly", ttl=ttl)
    with pytest.raises(kvstore.InvalidTTLError, match=match):
        bucket.election("jobs.nightly", ttl=ttl)
    assert await _messages(bucket) == 0


async def test_a_ttl_the_bucket_would_cut_short_or_stretch_is_refused(
    make_bucket: BucketFactory,
) -> None:
    aged = await make_bucket(max_age=timedelta(seconds=5))
    with pytest.raises(kvstore.InvalidTTLError, match="max_age"):
        aged.lock("jobs.nightly", ttl=10)
    marked = await make_bucket(history=5, marker_ttl=timedelta(seconds=10))
    with pytest.raises(kvstore.InvalidTTLError, match="marker_ttl"):
        marked.lock("jobs.nightly", ttl=5)
    assert await _messages(aged) == await _messages(marked) == 0


@pytest.mark.parametrize("timeout", [-1, float("nan"), "5", True])
async def test_a_bad_timeout_is_refused_at_once(bucket: kvstore.Bucket, timeout: Any) -> None:
    with pytest.raises(jetstream.ClientValidationError, match="timeout"):
        bucket.lock("jobs.nightly", timeout=timeout)
    with pytest.raises(jetstream.ClientValidationError, match="timeout"):
        bucket.election("jobs.nightly").campaign(b"n1", timeout=timeout)
    assert await _messages(bucket) == 0


async def test_a_candidate_value_that_is_not_bytes_is_refused(bucket: kvstore.Bucket) -> None:
    with pytest.raises(jetstream.WrongTypeError):
        bucket.election("leaders.indexer").campaign("node-1")  # type: ignore[arg-type]


async def test_a_candidate_value_too_large_for_the_lease_record_is_refused_at_once(
    make_bucket: BucketFactory,
) -> None:
    bucket = await make_bucket(max_value_size=100)
    election = bucket.election("leaders.indexer")
    with pytest.raises(kvstore.ValueTooLargeError, match="at most 77 bytes"):
        election.campaign(b"x" * 90)  # fits the bucket, not with the lease's holder id
    assert await _messages(bucket) == 0
    async with election.campaign(b"x" * 77, timeout=0):
        assert await election.leader() == b"x" * 77


async def test_a_bucket_without_per_message_ttl_cannot_hold_a_lock(
    js: jetstream.JetStream, peer: JetStreamContext, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("kv")
    layout = StreamConfig(  # a KV bucket as older clients make it: no per-message TTL
        name=f"KV_{name}",
        subjects=[f"$KV.{name}.>"],
        max_msgs_per_subject=1,
        allow_rollup_hdrs=True,
        deny_delete=True,
        allow_direct=True,
        allow_msg_ttl=False,
    )
    await peer.add_stream(layout)
    try:
        bucket = await kvstore.open_bucket(js, name)
        with pytest.raises(jetstream.MessageTTLDisabledError):
            async with bucket.lock("jobs.nightly", ttl=5):
                pass
        with pytest.raises(jetstream.MessageTTLDisabledError):
            async with bucket.election("leaders.indexer", ttl=5).campaign(b"n1"):
                pass
        assert await _messages(bucket) == 0
    finally:
        await kvstore.delete_bucket(js, name)
