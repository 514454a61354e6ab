"""Elastic group administration on a real server: configs land in ``elastic-consumer-groups``
byte for byte as orbit.go writes them, the work-queue stream ``<stream>-<group>`` receives the
stream's messages with the server's partition first, every membership change is a
compare-and-set (concurrent ones lose nothing), bad input raises typed errors with nothing
written; active members and step down for elastic and static groups."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import time
from collections.abc import AsyncIterator, Callable

import pytest

import jetstream
import kvstore
import pcgroups
from pcgroups import MemberMapping, PartitioningFilter
from tests.pcgroups.group_streams import group_stream

pytestmark = pytest.mark.integration
FIXTURES = pathlib.Path(__file__).parent / "fixtures"


@pytest.fixture
async def source(js: jetstream.JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    """A stream ``<s>.*.*``; its elastic groups and their streams are removed after the test."""
    async with group_stream(js, unique_name("el"), subjects="*.*") as name:
        yield name


async def stored(js: jetstream.JetStream, stream: str, group: str) -> tuple[bytes, int] | None:
    try:
        bucket = await kvstore.open_bucket(js, pcgroups.wire.ELASTIC_BUCKET)
        entry = await bucket.get(f"{stream}.{group}")
    except (kvstore.KeyNotFoundError, kvstore.BucketNotFoundError):
        return None
    return entry.value, entry.revision


async def stream_exists(js: jetstream.JetStream, name: str) -> bool:
    try:
        await js.stream_info(name)
    except jetstream.StreamNotFoundError:
        return False
    return True


def fixture(name: str, subject_root: str, source: str) -> bytes:
    """An orbit-written config from tests/pcgroups/fixtures, with its subjects on ``source``."""
    return (FIXTURES / name).read_bytes().strip().replace(subject_root.encode(), source.encode())


async def test_configs_are_byte_identical_to_orbits(js: jetstream.JetStream, source: str) -> None:
    # CreateElastic(6, [{orders.*.*, [2]}], 1000, 0) then AddMembers([m1])
    await pcgroups.create_elastic(
        js,
        source,
        "g",
        max_members=6,
        filters=[PartitioningFilter(f"{source}.*.*", (2,))],
        max_buffered_msgs=1000,
    )
    await pcgroups.add_members(js, source, "g", ["m1"])
    assert (await stored(js, source, "g") or (b"",))[0] == fixture(
        "elastic_members.json", "orders", source
    )
    # CreateElastic(2, nil, 0, 0): partitioning_filters null
    await pcgroups.create_elastic(js, source, "n", max_members=2)
    assert (await stored(js, source, "n") or (b"",))[0] == fixture(
        "elastic_null_filters.json", "-", "-"
    )
    # CreateElastic(3, [{events.>, nil}], 0, 1 MiB) then SetMemberMappings
    await pcgroups.create_elastic(
        js,
        source,
        "m",
        max_members=3,
        filters=[PartitioningFilter(f"{source}.>")],
        max_buffered_bytes=1048576,
    )
    await pcgroups.set_member_mappings(
        js, source, "m", [MemberMapping("x", (2,)), MemberMapping("y", (0, 1))]
    )
    assert (await stored(js, source, "m") or (b"",))[0] == fixture(
        "elastic_mapped.json", "events", source
    )
    assert await pcgroups.list_elastic(js, source) == ["g", "m", "n"]
    config = await pcgroups.elastic_config(js, source, "m")
    assert config.member_mappings == (MemberMapping("x", (2,)), MemberMapping("y", (0, 1)))
    assert await pcgroups.elastic_partition_filters(js, source, "m", "y") == ("0.>", "1.>")


async def test_an_orbit_written_config_is_managed_without_changing_its_shape(
    js: jetstream.JetStream, source: str
) -> None:
    await pcgroups.create_elastic(js, source, "n", max_members=2)
    # rewrite through membership changes: null partitioning_filters stays null
    await pcgroups.add_members(js, source, "n", ["b", "a"])
    assert (await stored(js, source, "n") or (b"",))[0] == (
        b'{"max_members":2,"partitioning_filters":null,"members":["b","a"]}'
    )
    await pcgroups.delete_members(js, source, "n", ["b", "a"])
    assert (await stored(js, source, "n") or (b"",))[0] == fixture(
        "elastic_null_filters.json", "-", "-"
    )


async def test_the_work_queue_gets_the_servers_partition_first(
    js: jetstream.JetStream, source: str
) -> None:
    config = await pcgroups.create_elastic(
        js, source, "g", max_members=4, filters=[PartitioningFilter(f"{source}.*.*", (2,))]
    )
    info = await js.stream_info(f"{source}-g")
    assert info.config.retention == "workqueue"
    assert info.config.discard == "new"
    keys = [f"k{i}" for i in range(40)]
    for key in keys:
        await js.publish(f"{source}.orders.{key}", key.encode())
    deadline = time.monotonic() + 10
    while (await js.stream_info(f"{source}-g")).state.messages < len(keys):
        assert time.monotonic() < deadline, "the work queue never got every message"
        await asyncio.sleep(0.05)
    partitions = set()
    for seq, key in enumerate(keys, start=1):
        message = await js.get_message(f"{source}-g", seq, direct=False)
        partition = pcgroups.wire.hash_partition(key.encode(), config.max_members)
        partitions.add(partition)
        assert message.subject == f"{partition}.{source}.orders.{key}"
    assert partitions == {0, 1, 2, 3}


async def test_creating_again_returns_the_group_and_a_different_one_is_refused(
    js: jetstream.JetStream, source: str
) -> None:
    first = await pcgroups.create_elastic(js, source, "g", max_members=3)
    await pcgroups.add_members(js, source, "g", ["m1"])
    again = await pcgroups.create_elastic(js, source, "g", max_members=3)
    assert again.members == ("m1",) and again.max_members == first.max_members
    before = await stored(js, source, "g")
    for kwargs in ({"max_members": 4}, {"max_members": 3, "filters": []}):
        with pytest.raises(pcgroups.GroupExistsError):
            await pcgroups.create_elastic(js, source, "g", **kwargs)  # type: ignore[arg-type]
    assert await stored(js, source, "g") == before


async def test_bad_input_raises_typed_errors_and_writes_nothing(
    js: jetstream.JetStream, source: str
) -> None:
    bad: list[tuple[type[Exception], dict[str, object]]] = [
        (pcgroups.InvalidGroupConfigError, {"max_members": 0}),
        (pcgroups.InvalidGroupConfigError, {"max_members": 2, "max_buffered_msgs": -1}),
        (pcgroups.InvalidGroupConfigError, {"max_members": 2, "filters": "a.*"}),
        (
            pcgroups.InvalidPartitioningFilterError,
            {"max_members": 2, "filters": [PartitioningFilter(f"{source}.a.b")]},
        ),
        (
            pcgroups.InvalidPartitioningFilterError,
            {"max_members": 2, "filters": [PartitioningFilter(f"{source}.*.*", (3,))]},
        ),
        (
            pcgroups.InvalidPartitioningFilterError,
            {"max_members": 2, "filters": [PartitioningFilter(f"{source}.*.*", (1, 1))]},
        ),
        (
            pcgroups.InvalidPartitioningFilterError,
            {"max_members": 2, "filters": [PartitioningFilter(f"{source}..*")]},
        ),
    ]
    for error, kwargs in bad:
        with pytest.raises(error):
            await pcgroups.create_elastic(js, source, "g", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(pcgroups.InvalidGroupNameError):
        await pcgroups.create_elastic(js, source, "a.b", max_members=2)
    with pytest.raises(jetstream.StreamNotFoundError):
        await pcgroups.create_elastic(js, f"{source}_missing", "g", max_members=2)
    assert await stored(js, source, "g") is None
    assert not await stream_exists(js, f"{source}-g")
    assert await stored(js, f"{source}_missing", "g") is None

    await pcgroups.create_elastic(js, source, "g", max_members=3)
    before = await stored(js, source, "g")
    with pytest.raises(pcgroups.InvalidMemberMappingError):
        await pcgroups.set_member_mappings(js, source, "g", [MemberMapping("x", (0, 1))])
    with pytest.raises(pcgroups.InvalidMemberMappingError):
        await pcgroups.set_member_mappings(
            js, source, "g", [MemberMapping("x", (0, 1)), MemberMapping("y", (1, 2))]
        )
    with pytest.raises(pcgroups.InvalidGroupNameError):
        await pcgroups.add_members(js, source, "g", ["ok", "no.dots"])
    with pytest.raises(pcgroups.InvalidGroupConfigError):
        await pcgroups.add_members(js, source, "g", "m1")
    assert await stored(js, source, "g") == before
    await pcgroups.set_member_mappings(js, source, "g", [MemberMapping("x", (0, 1, 2))])
    with pytest.raises(pcgroups.InvalidGroupConfigError, match="mappings"):
        await pcgroups.add_members(js, source, "g", ["m1"])
    config = await pcgroups.delete_member_mappings(js, source, "g")
    assert config.member_mappings == ()
    with pytest.raises(pcgroups.GroupNotFoundError):
        await pcgroups.add_members(js, source, "nope", ["m1"])


async def test_concurrent_membership_changes_lose_nothing(
    nats_server: jetstream.EmbeddedServer, js: jetstream.JetStream, source: str
) -> None:
    await pcgroups.create_elastic(js, source, "g", max_members=8)
    async with await jetstream.connect(nats_server.url) as other:
        for trial in range(15):
            a, b = f"a{trial}", f"b{trial}"
            await asyncio.gather(
                pcgroups.add_members(js, source, "g", [a]),
                pcgroups.add_members(other, source, "g", [b]),
            )
            members = (await pcgroups.elastic_config(js, source, "g")).members
            assert {a, b} <= set(members), f"trial {trial}: {members}"
        removed = [f"a{t}" for t in range(15)]
        kept = [f"b{t}" for t in range(15)]
        await asyncio.gather(
            pcgroups.delete_members(js, source, "g", removed[:8]),
            pcgroups.delete_members(other, source, "g", removed[8:]),
        )
    assert (await pcgroups.elastic_config(js, source, "g")).members == tuple(kept)


async def test_delete_removes_the_config_and_the_work_queue(
    js: jetstream.JetStream, source: str
) -> None:
    await pcgroups.create_elastic(js, source, "g", max_members=2)
    assert await stream_exists(js, f"{source}-g")
    await pcgroups.delete_elastic(js, source, "g")
    assert await stored(js, source, "g") is None
    assert not await stream_exists(js, f"{source}-g")
    assert [g async for g in pcgroups.list_elastic(js, source)] == []
    with pytest.raises(pcgroups.GroupNotFoundError):
        await pcgroups.delete_elastic(js, source, "g")


def member_consumer(
    name: str, filters: list[str], durable: bool = False
) -> jetstream.ConsumerConfig:
    return jetstream.ConsumerConfig(
        name="" if durable else name,
        durable_name=name if durable else "",
        ack_policy="explicit",
        filter_subjects=filters,
        priority_groups=[pcgroups.wire.PRIORITY_GROUP],
        priority_policy="pinned_client",
        priority_timeout=5,
    )


async def test_elastic_active_members_and_step_down(js: jetstream.JetStream, source: str) -> None:
    config = await pcgroups.create_elastic(js, source, "g", max_members=2)
    config = await pcgroups.add_members(js, source, "g", ["m1", "m2"])
    queue = f"{source}-g"
    assert await pcgroups.elastic_active_members(js, source, "g") == []
    filters = list(pcgroups.wire.elastic_member_filters(config, "m1"))
    consumer = await js.create_consumer(queue, member_consumer("m1", filters))
    assert await pcgroups.elastic_active_members(js, source, "g") == ["m1"]

    await js.publish(f"{source}.a.b", b"")
    n = 0
    while True:  # a message of m1's partition pins m1's consumer
        try:
            msg = await consumer.next(timeout=0.5, group=pcgroups.wire.PRIORITY_GROUP)
            break
        except jetstream.RequestTimeoutError:
            n += 1
            assert n < 10
            await js.publish(f"{source}.a.b{n}", b"")
    await msg.ack()
    (state,) = (await consumer.info()).priority_groups or []
    assert state.pinned
    await pcgroups.elastic_step_down(js, source, "g", "m1")
    (state,) = (await consumer.info()).priority_groups or []
    assert not state.pinned
    with pytest.raises(pcgroups.MemberNotFoundError):
        await pcgroups.elastic_step_down(js, source, "g", "m3")
    with pytest.raises(jetstream.ConsumerNotFoundError):
        await pcgroups.elastic_step_down(js, source, "g", "m2")  # no consumer yet


async def test_static_active_members_and_step_down(js: jetstream.JetStream, source: str) -> None:
    # a stream whose subjects start with the partition, as static groups expect
    static_stream = f"{source}_st"
    await js.add_stream(
        jetstream.StreamConfig(
            name=static_stream,
            subjects=[f"{static_stream}.*"],
            subject_transform={
                "src": f"{static_stream}.*",
                "dest": f"{{{{partition(2,1)}}}}.{static_stream}.{{{{wildcard(1)}}}}",
            },
        )
    )
    key = next(
        k for k in (f"k{i}" for i in range(100)) if pcgroups.wire.hash_partition(k.encode(), 2) == 0
    )
    try:
        config = await pcgroups.create_static(
            js, static_stream, "g", max_members=2, members=["m1", "m2"]
        )
        filters = list(pcgroups.wire.static_member_filters(config, "m1"))
        consumer = await js.create_consumer(
            static_stream, member_consumer("g-m1", filters, durable=True)
        )
        # a consumer without a waiting pull is not active (orbit: num_waiting != 0)
        assert await pcgroups.static_active_members(js, static_stream, "g") == []
        pulling = asyncio.ensure_future(
            consumer.next(timeout=5, group=pcgroups.wire.PRIORITY_GROUP)
        )
        deadline = time.monotonic() + 5
        while await pcgroups.static_active_members(js, static_stream, "g") != ["m1"]:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        await js.publish(f"{static_stream}.{key}", b"")  # partition 0: m1's
        msg = await pulling
        await msg.ack()
        (state,) = (await consumer.info()).priority_groups or []
        assert state.pinned
        await pcgroups.static_step_down(js, static_stream, "g", "m1")
        (state,) = (await consumer.info()).priority_groups or []
        assert not state.pinned
        with pytest.raises(pcgroups.MemberNotFoundError):
            await pcgroups.static_step_down(js, static_stream, "g", "x")
    finally:
        with contextlib.suppress(jetstream.JetStreamError):
            await pcgroups.delete_static(js, static_stream, "g")
        await js.delete_stream(static_stream)
