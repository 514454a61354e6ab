"""Writes fenced by a lease are stored only while the lease is held: once another client has
the lease key, the server refuses the whole batch, nothing is stored, and the lease says so."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

import jetstream
import kvstore
from jetstream import Keyring
from tests.conftest import BucketFactory


async def _steal(bucket: kvstore.Bucket, key: str) -> None:
    """Another client frees the lease key and takes it, behind the holder's back."""
    await bucket.purge(key)
    await bucket.create(key, b"thief", ttl=30)


async def _stored_keys(bucket: kvstore.Bucket) -> list[str]:
    return sorted(await bucket.keys())


@pytest.mark.parametrize("history", [1, 5])
async def test_a_fenced_put_many_renews_the_lease_while_it_is_held(
    make_bucket: BucketFactory, history: int
) -> None:
    bucket = await make_bucket(history=history)
    async with bucket.lock("jobs.nightly", ttl=10) as lease:
        before = lease.revision
        revisions = await bucket.put_many({"report.a": b"1", "report.b": b"2"}, fence=lease)
        assert set(revisions) == {"report.a", "report.b"}
        assert lease.revision > max(revisions.values()) > before
        assert lease.token == before and lease.held
        entry = await bucket.get("jobs.nightly")
        assert entry.revision == lease.revision and entry.ttl == 10


@pytest.mark.parametrize("write", ["put_many", "batch", "put", "delete"])
async def test_a_fenced_write_of_a_stolen_lease_is_refused_by_the_server(
    bucket: kvstore.Bucket, write: str
) -> None:
    await bucket.put("report.old", b"kept")
    async with bucket.lock("jobs.nightly", ttl=30) as lease:
        await _steal(bucket, "jobs.nightly")
        assert lease.held  # the client cannot know yet: only the server can
        with pytest.raises(kvstore.LeaseLostError) as caught:
            if write == "put_many":
                await bucket.put_many({"report.a": b"1", "report.b": b"2"}, fence=lease)
            elif write == "batch":
                async with bucket.batch(fence=lease) as batch:
                    batch.put("report.a", b"1")
            elif write == "put":
                await bucket.put("report.a", b"1", fence=lease)
            else:
                await bucket.delete("report.old", fence=lease)
        assert caught.value.key == "jobs.nightly" and caught.value.token == lease.token
        assert not lease.held
        await lease.wait_lost()
    assert await _stored_keys(bucket) == ["jobs.nightly", "report.old"]
    assert (await bucket.get("jobs.nightly")).value == b"thief"  # the release left it alone


async def test_a_lost_lease_stays_lost_for_every_later_fenced_write(
    bucket: kvstore.Bucket,
) -> None:
    async with bucket.lock("jobs.nightly", ttl=30) as lease:
        await _steal(bucket, "jobs.nightly")
        with pytest.raises(kvstore.LeaseLostError):
            await bucket.put("report.a", b"1", fence=lease)
        with pytest.raises(kvstore.LeaseLostError):
            await bucket.put("report.b", b"1", fence=lease)
    assert await _stored_keys(bucket) == ["jobs.nightly"]


async def test_a_fenced_batch_refuses_to_write_the_lease_key_itself(
    bucket: kvstore.Bucket,
) -> None:
    async with bucket.lock("jobs.nightly", ttl=30) as lease:
        batch = bucket.batch(fence=lease)
        with pytest.raises(kvstore.InvalidKeyError, match="lease key"):
            batch.put("jobs.nightly", b"mine")
        with pytest.raises(kvstore.InvalidKeyError, match="lease key"):
            await bucket.put_many({"jobs.nightly": b"x"}, fence=lease)
        batch.abandon()
        with pytest.raises(kvstore.BatchTooLargeError, match="lease key"):
            await bucket.put_many({"a": b"1", "b": b"2"}, max_keys=2, fence=lease)


async def test_a_lease_of_another_bucket_is_no_fence(make_bucket: BucketFactory) -> None:
    first, second = await make_bucket(), await make_bucket()
    async with first.lock("jobs.nightly", ttl=30) as lease:
        with pytest.raises(jetstream.ClientValidationError, match="bucket"):
            await second.put("report.a", b"1", fence=lease)
        with pytest.raises(jetstream.WrongTypeError, match="Lease"):
            await second.put("report.a", b"1", fence="jobs.nightly")  # type: ignore[arg-type]
    assert await _stored_keys(second) == []


async def test_a_user_condition_failing_in_a_fenced_batch_keeps_the_lease(
    bucket: kvstore.Bucket,
) -> None:
    await bucket.put("report.a", b"0")
    async with bucket.lock("jobs.nightly", ttl=30) as lease:
        with pytest.raises(kvstore.WrongRevisionError) as caught:
            await bucket.put_many({"report.a": b"1"}, expect={"report.a": 999}, fence=lease)
        assert caught.value.key == "report.a"
        assert lease.held
        await bucket.put("report.a", b"2", fence=lease)  # the lease's revision is still right
    assert (await bucket.get("report.a")).value == b"2"


async def test_concurrent_fenced_writes_of_one_lease_all_land_and_keep_it(
    bucket: kvstore.Bucket,
) -> None:
    async with bucket.lock("jobs.nightly", ttl=3) as lease:
        writes = [bucket.put(f"report.{n}", b"v", fence=lease) for n in range(30)]
        revisions = await asyncio.gather(*writes)  # each conditioned on the one before
        assert len(set(revisions)) == 30 and lease.held
        while lease.revision == max(revisions) + 1:  # until a renewal follows them
            await asyncio.sleep(0.05)
        assert lease.held
    assert len(await bucket.keys("report.>")) == 30


async def test_fenced_writes_cancelled_at_any_point_keep_the_lease(
    bucket: kvstore.Bucket,
) -> None:
    # A cancel lands at each await of a fenced write in turn. A write cut short in flight
    # left the server an atomic batch never committed (it keeps up to 50 per stream, for
    # 10 s) and the lease unsure of its key's revision: some fifty of them and the lease's
    # next write was refused, the lease lost.
    async with bucket.lock("jobs.nightly", ttl=5) as lease:
        for steps in range(1, 60):
            writing = asyncio.ensure_future(
                bucket.put_many({"report.a": b"1", "report.b": b"2"}, fence=lease)
            )
            for _ in range(steps):
                await asyncio.sleep(0)
            writing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writing
            await bucket.put("report.c", b"3", fence=lease)
            assert lease.held, f"lost after a cancel at step {steps}"


async def test_a_lease_used_after_its_block_fences_nothing(bucket: kvstore.Bucket) -> None:
    async with bucket.lock("jobs.nightly", ttl=30) as lease:
        pass
    with pytest.raises(kvstore.LeaseLostError, match="released"):
        await bucket.put("report.a", b"1", fence=lease)
    assert await _stored_keys(bucket) == []


@pytest.mark.parametrize("kind", ["encrypted", "codec"])
async def test_leases_and_fences_work_through_encryption_and_key_codecs(
    js: jetstream.JetStream, make_bucket: BucketFactory, kind: str
) -> None:
    made = await make_bucket(history=5, marker_ttl="1s")
    options: dict[str, Any] = (
        {"encryption": Keyring({"k1": bytes(range(32))}, primary="k1")}
        if kind == "encrypted"
        else {"key_codec": kvstore.Base64KeyCodec()}
    )
    bucket = await kvstore.open_bucket(js, made.name, **options)
    election = bucket.election("leaders.indexer", ttl=3)
    async with election.campaign(b"node\n1 \xff") as lease:
        assert await election.leader() == b"node\n1 \xff"
        await bucket.put_many({"report.a": b"1"}, fence=lease)
        await _steal(bucket, "leaders.indexer")
        with pytest.raises(kvstore.LeaseLostError):
            await bucket.put("report.b", b"2", fence=lease)
    assert await _stored_keys(bucket) == ["leaders.indexer", "report.a"]


async def test_typed_views_fence_their_writes_too(bucket: kvstore.Bucket) -> None:
    counts = bucket.typed(dict[str, int])
    async with bucket.lock("jobs.nightly", ttl=30) as lease:
        await counts.put("report.a", {"n": 1}, fence=lease)
        await counts.put_many({"report.b": {"n": 2}}, fence=lease)
        await _steal(bucket, "jobs.nightly")
        with pytest.raises(kvstore.LeaseLostError):
            await counts.put_many({"report.c": {"n": 3}}, fence=lease)
        with pytest.raises(kvstore.LeaseLostError):
            await counts.delete("report.a", fence=lease)
    assert await _stored_keys(bucket) == ["jobs.nightly", "report.a", "report.b"]
