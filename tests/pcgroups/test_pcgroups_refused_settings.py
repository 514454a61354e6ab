"""Group settings the server always refuses, on a real server: refused before anything is
written, with typed errors naming the rule (static filters covering one another, overlapping
partitioning filters, member templates no consumer may have, more filter subjects on one
member's consumer than the server can take: ``MAX_MEMBER_FILTERS``); each client-side rule is
checked against the server's own refusal, so nothing it accepts is refused. A config another
client wrote that the server would refuse ends a member when it enters or when the config
changes, and a refusal only the server can know, repeated, ends the member with
``MemberConsumerRefusedError`` instead of retrying for good."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

import jetstream
import kvstore
import pcgroups
from jetstream import ConsumerConfig
from pcgroups import MAX_MEMBER_FILTERS, PartitioningFilter
from tests.conftest import BucketFactory
from tests.pcgroups.group_streams import group_stream

pytestmark = pytest.mark.integration
DEADLINE = 30.0
TOO_MANY = 20_000  # partitions: before, a member's consumer create was never answered


@pytest.fixture
async def source(js: jetstream.JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    async with group_stream(js, unique_name("prs")) as name:
        yield name


@pytest.fixture
async def static_stream(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> AsyncIterator[str]:
    async with group_stream(js, unique_name("prt"), partitions=2) as name:
        yield name


async def nothing_written(js: jetstream.JetStream, stream: str) -> None:
    assert [g async for g in pcgroups.list_static(js, stream)] == []
    assert [g async for g in pcgroups.list_elastic(js, stream)] == []
    assert [s async for s in js.stream_names() if s.startswith(f"{stream}-")] == []
    assert [c async for c in js.consumer_names(stream)] == []


async def test_static_filters_covering_one_another_are_refused(
    js: jetstream.JetStream, static_stream: str
) -> None:
    s = static_stream
    for filters in ([f"{s}.*", f"{s}.>"], [f"{s}.a", f"{s}.*"]):
        with pytest.raises(pcgroups.InvalidGroupConfigError, match="covers"):
            await pcgroups.create_static(js, s, "g", max_members=2, members=["m1"], filters=filters)
    await nothing_written(js, s)
    with pytest.raises(jetstream.ServerError) as refused:  # what a member would have met
        await js.create_consumer_info(
            s, ConsumerConfig(name="c", filter_subjects=[f"0.{s}.*", f"0.{s}.>"])
        )
    assert refused.value.err_code == 10138


async def test_overlapping_partitioning_filters_are_refused_before_anything_is_written(
    js: jetstream.JetStream, source: str
) -> None:
    filters = [PartitioningFilter(f"{source}.*", (1,)), PartitioningFilter(f"{source}.>")]
    with pytest.raises(pcgroups.InvalidPartitioningFilterError, match="covers"):
        await pcgroups.create_elastic(js, source, "g", max_members=2, filters=filters)
    await nothing_written(js, source)


REFUSED = [
    ConsumerConfig(deliver_subject="push.here"),
    ConsumerConfig(max_deliver=1, backoff=[1, 2]),
    ConsumerConfig(deliver_policy="all", opt_start_seq=5),
    ConsumerConfig(deliver_policy="by_start_time"),
    ConsumerConfig(sample_freq="often"),
    ConsumerConfig(max_expires=timedelta(microseconds=10)),
    ConsumerConfig(description="d" * 4097),
]
ACCEPTED = [
    ConsumerConfig(max_deliver=2, backoff=[1, 2]),
    ConsumerConfig(deliver_policy="by_start_time", opt_start_time=datetime.now(UTC)),
    ConsumerConfig(sample_freq="30%", description="d" * 4096),
]


async def test_member_templates_are_refused_exactly_when_the_server_refuses_them(
    js: jetstream.JetStream, static_stream: str, make_bucket: BucketFactory
) -> None:
    bucket = await make_bucket()
    pinned = {"priority_groups": ["PCG"], "priority_policy": "pinned_client"}
    for i, template in enumerate(REFUSED + ACCEPTED):
        refused = template in REFUSED
        try:  # the server's verdict on such a member consumer
            config = msgspec.structs.replace(
                template, durable_name=f"c{i}", ack_policy="explicit", **pinned
            )
            await js.create_consumer_info(static_stream, config)
        except jetstream.ServerError:
            assert refused, f"the server refuses {template}"
        else:
            assert not refused, f"the server accepts {template}"
        for make in (
            functools.partial(pcgroups.consume_static, js, static_stream, "g", "m1"),
            functools.partial(pcgroups.consume_elastic, js, static_stream, "g", "m1"),
            functools.partial(pcgroups.watch_group, bucket, "g", "m1"),
        ):
            if refused:
                with pytest.raises(pcgroups.InvalidMemberConfigError):
                    make(config=template)
            else:
                make(config=template)


async def test_a_refusal_only_the_server_knows_ends_the_member_once_repeated(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("prl")
    destination = f"{{{{partition(2,1)}}}}.{name}.{{{{wildcard(1)}}}}"
    config = jetstream.StreamConfig(
        name=name,
        subjects=[f"{name}.*"],
        subject_transform={"src": f"{name}.*", "dest": destination},
        consumer_limits={"max_ack_pending": 10},
    )
    await js.add_stream(config)
    try:
        await pcgroups.create_static(js, name, "g", max_members=2, members=["m1"])
        template = ConsumerConfig(ack_wait=2, max_ack_pending=100)  # over the stream's limit
        async with pcgroups.consume_static(js, name, "g", "m1", config=template) as member:
            with pytest.raises(pcgroups.MemberConsumerRefusedError) as ended:
                await asyncio.wait_for(member.done(), DEADLINE)
        assert ended.value.code == 400 and ended.value.err_code
        assert "ack pending" in str(ended.value)
        assert isinstance(ended.value.__cause__, jetstream.ServerError)
    finally:
        await pcgroups.delete_static(js, name, "g")
        await js.delete_stream(name)


async def test_a_config_another_client_wrote_with_covering_filters_ends_the_member_on_entering(
    js: jetstream.JetStream, static_stream: str
) -> None:
    await pcgroups.create_static(js, static_stream, "seed", max_members=1, members=["m"])
    raw = pcgroups.wire.encode_static_config(
        pcgroups.StaticConfig(
            max_members=2, members=("m1",), filters=(f"{static_stream}.*", f"{static_stream}.>")
        )
    )  # orbit's CreateStatic writes this: it does not look at the filters
    bucket = await kvstore.open_bucket(js, pcgroups.wire.STATIC_BUCKET)
    await bucket.put(f"{static_stream}.g", raw)
    with pytest.raises(pcgroups.InvalidGroupConfigError, match="covers"):
        async with pcgroups.consume_static(js, static_stream, "g", "m1") as member:
            await asyncio.wait_for(member.done(), DEADLINE)
    assert "g-m1" not in [c async for c in js.consumer_names(static_stream)]


async def test_more_filters_than_a_member_consumer_can_take_are_refused(
    js: jetstream.JetStream, source: str, static_stream: str, make_bucket: BucketFactory
) -> None:
    with pytest.raises(pcgroups.InvalidGroupConfigError, match="MAX_MEMBER_FILTERS"):
        await pcgroups.create_elastic(js, source, "g", max_members=TOO_MANY)
    with pytest.raises(pcgroups.InvalidGroupConfigError, match="2,048"):
        two = [PartitioningFilter(f"{source}.a.*", (1,)), PartitioningFilter(f"{source}.b.*", (1,))]
        await pcgroups.create_elastic(
            js, source, "g", max_members=MAX_MEMBER_FILTERS // 2 + 1, filters=two
        )
    with pytest.raises(pcgroups.InvalidGroupConfigError, match="MAX_MEMBER_FILTERS"):
        await pcgroups.create_static(js, static_stream, "g", max_members=TOO_MANY, members=["m1"])
    mapped = [pcgroups.MemberMapping("m1", tuple(range(MAX_MEMBER_FILTERS + 1)))]
    mapped.append(pcgroups.MemberMapping("m2", tuple(range(MAX_MEMBER_FILTERS + 1, TOO_MANY))))
    with pytest.raises(pcgroups.InvalidGroupConfigError, match="'m2'"):  # the biggest
        await pcgroups.create_static(
            js, static_stream, "g", max_members=TOO_MANY, member_mappings=mapped
        )
    long_filter = f"{static_stream}." + "x" * 1100  # 1,000 partitions of it: over 1 MB
    with pytest.raises(pcgroups.InvalidGroupConfigError, match="max_payload"):
        await pcgroups.create_static(
            js, static_stream, "g", max_members=1000, members=["m1"], filters=[long_filter]
        )
    bucket = await make_bucket()
    with pytest.raises(pcgroups.InvalidGroupConfigError, match="MAX_MEMBER_FILTERS"):
        await pcgroups.create_bucket_group(bucket, "g", max_members=TOO_MANY)
    await nothing_written(js, source)
    await nothing_written(js, static_stream)
    assert [g async for g in pcgroups.list_elastic(js, bucket.stream)] == []
    # a static group's membership is fixed: 20,000 partitions over 10 members are 2,000 each
    members = [f"m{i}" for i in range(10)]
    await pcgroups.create_static(js, static_stream, "g", max_members=TOO_MANY, members=members)


async def test_a_member_at_the_limit_consumes(js: jetstream.JetStream, source: str) -> None:
    await pcgroups.create_elastic(js, source, "g", max_members=MAX_MEMBER_FILTERS)
    await pcgroups.add_members(js, source, "g", ["m1"])
    got = asyncio.Event()
    async with pcgroups.consume_elastic(js, source, "g", "m1", lambda m: got.set()) as member:
        await js.publish(f"{source}.k", b"x")
        await asyncio.wait_for(got.wait(), DEADLINE)
        assert len(member.partitions) == MAX_MEMBER_FILTERS


async def test_a_config_another_client_wrote_with_too_many_partitions_ends_the_member(
    js: jetstream.JetStream, source: str
) -> None:
    """Entering, or when a membership change gives the member more than it can take."""
    info = await js.stream_info(source)
    partitions = MAX_MEMBER_FILTERS + 1
    config = pcgroups.ElasticConfig(max_members=partitions, members=("m1", "m2"))
    await js.add_stream(pcgroups.wire.elastic_stream_config(source, "g", config, info.config))
    await pcgroups.create_elastic(js, source, "seed", max_members=1)  # the bucket
    bucket = await kvstore.open_bucket(js, pcgroups.wire.ELASTIC_BUCKET)
    await bucket.put(f"{source}.g", pcgroups.wire.encode_elastic_config(config))  # as orbit may
    template = ConsumerConfig(ack_wait=2)
    async with pcgroups.consume_elastic(js, source, "g", "m1", config=template) as member:
        assert len(member.partitions) == (partitions + 1) // 2
        await pcgroups.delete_members(js, source, "g", ["m2"])  # m1 would own them all
        with pytest.raises(pcgroups.InvalidGroupConfigError, match="MAX_MEMBER_FILTERS"):
            await asyncio.wait_for(member.done(), DEADLINE)
    alone = pcgroups.ElasticConfig(max_members=TOO_MANY, members=("m1",))
    await bucket.put(f"{source}.g", pcgroups.wire.encode_elastic_config(alone))
    with pytest.raises(pcgroups.InvalidGroupConfigError, match="MAX_MEMBER_FILTERS"):
        async with pcgroups.consume_elastic(js, source, "g", "m1") as member:
            await asyncio.wait_for(member.done(), DEADLINE)
