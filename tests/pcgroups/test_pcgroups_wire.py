"""The elastic work-queue stream and member filters orbit.go uses, checked on a real server:
our stream config is accepted and equals the one nats.go sends for ``CreateElastic`` (a
repeated create in Go's shape is a no-op), sourcing puts the server's partition first and it
equals ``hash_partition``, and orbit's member filter subjects behave as docs/PCGROUPS-WIRE.md
says (disjoint members coexist on the work queue; a repeated filter is refused)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable

import pytest

import jetstream
import pcgroups
from pcgroups import ElasticConfig, PartitioningFilter


@pytest.fixture
async def source(js: jetstream.JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    """A plain stream ``<s>.*.*`` and, after the test, its elastic group streams removed."""
    name = unique_name("src")
    await js.add_stream(jetstream.StreamConfig(name=name, subjects=[f"{name}.*.*"]))
    yield name
    async for stream in js.stream_names():
        if stream.startswith(f"{name}-"):
            await js.delete_stream(stream)
    await js.delete_stream(name)


async def wait_for_messages(js: jetstream.JetStream, stream: str, count: int) -> None:
    deadline = time.monotonic() + 10
    while (await js.stream_info(stream)).state.messages < count:
        assert time.monotonic() < deadline, f"{stream} never sourced {count} messages"
        await asyncio.sleep(0.05)


async def test_sourcing_puts_the_servers_partition_first(
    js: jetstream.JetStream, source: str
) -> None:
    config = ElasticConfig(
        max_members=5,
        partitioning_filters=(PartitioningFilter(f"{source}.*.*", (2,)),),
        members=("m1", "m2"),
    )
    info = await js.stream_info(source)
    created = await js.add_stream(
        pcgroups.wire.elastic_stream_config(source, "g", config, info.config)
    )
    assert created.config.name == f"{source}-g"
    assert created.config.retention == "workqueue"
    keys = [f"k{i}" for i in range(20)]
    for key in keys:
        await js.publish(f"{source}.orders.{key}", key.encode())
    await wait_for_messages(js, f"{source}-g", len(keys))
    for seq, key in enumerate(keys, start=1):
        message = await js.get_message(f"{source}-g", seq, direct=False)
        # partitioned on wildcard 2 only: the key token, hashed alone
        partition = pcgroups.wire.hash_partition(key.encode(), 5)
        assert message.subject == f"{partition}.{source}.orders.{key}"


async def test_a_create_in_nats_go_shape_is_the_same_stream(
    js: jetstream.JetStream, source: str
) -> None:
    config = ElasticConfig(max_members=3, max_buffered_msgs=100)
    info = await js.stream_info(source)
    await js.add_stream(pcgroups.wire.elastic_stream_config(source, "g", config, info.config))
    # the fields orbit's CreateElastic sets, zero values as nats.go sends them
    go_shape = {
        "name": f"{source}-g",
        "retention": "workqueue",
        "num_replicas": 1,
        "storage": "file",
        "max_msgs": 100,
        "max_bytes": 0,
        "discard": "new",
        "sources": [
            {"name": source, "subject_transforms": [{"src": ">", "dest": "{{Partition(3)}}.>"}]}
        ],
        "allow_direct": True,
    }
    reply = await js.nc.request(
        js.api.stream_create(f"{source}-g"), json.dumps(go_shape).encode(), timeout=5
    )
    answer = json.loads(reply.data)
    assert "error" not in answer, answer
    assert answer["config"]["max_bytes"] == -1


async def test_member_filters_on_the_work_queue(js: jetstream.JetStream, source: str) -> None:
    config = ElasticConfig(
        max_members=4,
        partitioning_filters=(PartitioningFilter(f"{source}.*.*", (1, 2)),),
        members=("m1", "m2", "m3"),
    )
    info = await js.stream_info(source)
    stream = (
        await js.add_stream(pcgroups.wire.elastic_stream_config(source, "g", config, info.config))
    ).config.name
    for member in ("m1", "m2", "m3"):
        filters = list(pcgroups.wire.elastic_member_filters(config, member))
        await js.create_consumer(
            stream,
            jetstream.ConsumerConfig(name=member, filter_subjects=filters, ack_policy="explicit"),
        )
    # a member that would overlap another one's partitions is refused on a work queue (10100)
    with pytest.raises(jetstream.ServerError) as overlap:
        await js.create_consumer(
            stream,
            jetstream.ConsumerConfig(
                name="intruder", filter_subjects=["0.>"], ack_policy="explicit"
            ),
        )
    assert overlap.value.err_code == 10100
    # orbit's mapped filters repeat "<p>.>" once per filter: the server refuses that (10138)
    with pytest.raises(jetstream.ServerError) as repeated:
        await js.create_consumer(
            source,
            jetstream.ConsumerConfig(
                name="dup", filter_subjects=["0.>", "0.>"], ack_policy="explicit"
            ),
        )
    assert repeated.value.err_code == 10138
