"""The KV buckets holding group configs deleted as a whole (``kv del`` of the bucket, a test
cleanup): every member of every group in it ends with ``GroupDeletedError``, as when its own
group is deleted; the groups can then be created again, with another partitioning too (the
elastic work-queue stream the deleted config left behind is replaced), and
``delete_elastic`` removes such a leftover. A stream that merely has a group work queue's name
is never touched."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

import jetstream
import kvstore
import pcgroups
from pcgroups import PartitioningFilter
from tests.conftest import BucketFactory
from tests.pcgroups.group_streams import group_stream

pytestmark = pytest.mark.integration
DEADLINE = 30.0


@pytest.fixture
async def source(js: jetstream.JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    async with group_stream(js, unique_name("pbd")) as name:
        yield name


@pytest.fixture
async def static_stream(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> AsyncIterator[str]:
    async with group_stream(js, unique_name("pbs"), partitions=2) as name:
        yield name


def by_key(source: str) -> PartitioningFilter:
    return PartitioningFilter(f"{source}.*", (1,))


async def test_members_end_with_group_deleted_when_the_config_buckets_are_deleted(
    js: jetstream.JetStream,
    source: str,
    static_stream: str,
    make_bucket: BucketFactory,
) -> None:
    await pcgroups.create_elastic(js, source, "g", max_members=2, filters=[by_key(source)])
    await pcgroups.add_members(js, source, "g", ["m1"])
    await pcgroups.create_static(js, static_stream, "g", max_members=2, members=["m1"])
    bucket = await make_bucket()
    await pcgroups.create_bucket_group(bucket, "w", max_members=2, members=["m1"])
    template = jetstream.ConsumerConfig(ack_wait=2)
    async with (
        pcgroups.consume_elastic(js, source, "g", "m1", config=template) as elastic,
        pcgroups.consume_static(js, static_stream, "g", "m1", config=template) as static,
        pcgroups.watch_group(bucket, "w", "m1", config=template) as watch,
    ):
        await kvstore.delete_bucket(js, pcgroups.wire.ELASTIC_BUCKET)
        await kvstore.delete_bucket(js, pcgroups.wire.STATIC_BUCKET)
        for member in (elastic, static, watch):
            with pytest.raises(pcgroups.GroupDeletedError):
                await asyncio.wait_for(member.done(), DEADLINE)
    with pytest.raises(pcgroups.GroupNotFoundError):
        await pcgroups.elastic_config(js, source, "g")
    # created again the same way, and the static group too
    await pcgroups.create_elastic(js, source, "g", max_members=2, filters=[by_key(source)])
    await pcgroups.create_static(js, static_stream, "g", max_members=2, members=["m1"])
    assert [g async for g in pcgroups.list_static(js, static_stream)] == ["g"]


async def test_a_group_is_created_again_with_another_partitioning_after_its_bucket_was_deleted(
    js: jetstream.JetStream, source: str
) -> None:
    await pcgroups.create_elastic(js, source, "g", max_members=2, filters=[by_key(source)])
    await js.publish(f"{source}.a", b"old")
    queue = pcgroups.wire.elastic_stream_name(source, "g")
    while (await js.stream_info(queue)).state.messages < 1:  # sourced into the old work queue
        await asyncio.sleep(0.02)
    await kvstore.delete_bucket(js, pcgroups.wire.ELASTIC_BUCKET)  # the work queue stays behind
    config = await pcgroups.create_elastic(js, source, "g", max_members=3)
    assert await pcgroups.elastic_config(js, source, "g") == config
    info = await js.stream_info(queue)
    assert info.config.sources == [
        {"name": source, "subject_transforms": [{"src": ">", "dest": "{{Partition(3)}}.>"}]}
    ]
    # the new work queue sources the stream from its start
    while (info := await js.stream_info(queue)).state.messages < 1:
        await asyncio.sleep(0.02)
    message = await js.get_message(queue, info.state.first_seq)
    assert (
        message.subject == f"{pcgroups.wire.hash_partition(f'{source}.a'.encode(), 3)}.{source}.a"
    )


async def test_delete_elastic_removes_a_work_queue_its_config_left_behind(
    js: jetstream.JetStream, source: str
) -> None:
    await pcgroups.create_elastic(js, source, "g", max_members=2)
    await kvstore.delete_bucket(js, pcgroups.wire.ELASTIC_BUCKET)
    await pcgroups.delete_elastic(js, source, "g")
    with pytest.raises(jetstream.StreamNotFoundError):
        await js.stream_info(pcgroups.wire.elastic_stream_name(source, "g"))
    with pytest.raises(pcgroups.GroupNotFoundError):  # nothing of it is left
        await pcgroups.delete_elastic(js, source, "g")


async def test_a_stream_with_a_work_queue_name_that_is_no_work_queue_is_left_alone(
    js: jetstream.JetStream, source: str
) -> None:
    name = pcgroups.wire.elastic_stream_name(source, "g")
    await js.add_stream(jetstream.StreamConfig(name=name, subjects=[f"{name}.>"]))
    await js.publish(f"{name}.x", b"mine")
    with pytest.raises(pcgroups.GroupExistsError, match=name):
        await pcgroups.create_elastic(js, source, "g", max_members=2)
    with pytest.raises(pcgroups.GroupNotFoundError):
        await pcgroups.delete_elastic(js, source, "g")
    assert (await js.stream_info(name)).state.messages == 1
    with pytest.raises(pcgroups.GroupNotFoundError):
        await pcgroups.elastic_config(js, source, "g")


async def test_concurrent_creates_over_a_left_work_queue_agree_on_one_partitioning(
    js: jetstream.JetStream, source: str
) -> None:
    """Three creates at once (two alike) over the work queue a deleted bucket left: the ones
    that return agree with the stored config, the others raise ``GroupExistsError``, and the
    work queue is partitioned as the stored config says."""
    queue = pcgroups.wire.elastic_stream_name(source, "g")
    for _ in range(5):
        await pcgroups.create_elastic(js, source, "g", max_members=2)
        await kvstore.delete_bucket(js, pcgroups.wire.ELASTIC_BUCKET)
        results = await asyncio.gather(
            *(pcgroups.create_elastic(js, source, "g", max_members=n) for n in (3, 4, 4)),
            return_exceptions=True,
        )
        stored = await pcgroups.elastic_config(js, source, "g")
        for result in results:
            if isinstance(result, pcgroups.ElasticConfig):
                assert result == stored
            else:
                assert isinstance(result, pcgroups.GroupExistsError), result
        sources = (await js.stream_info(queue)).config.sources or []
        dest = sources[0]["subject_transforms"][0]["dest"]
        assert dest == f"{{{{Partition({stored.max_members})}}}}.>"
        await pcgroups.delete_elastic(js, source, "g")
