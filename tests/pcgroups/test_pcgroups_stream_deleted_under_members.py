"""The stream a member consumes from deleted under it (a static group's stream, an elastic
group's work queue ``<stream>-<group>``, by an operator or a cleanup), the group's config
still stored: the member cannot ever consume again, so it ends with a typed error rather than
asking the server to create its consumer again for good, without a word."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

import jetstream
import pcgroups
from pcgroups import PartitioningFilter
from tests.pcgroups.group_streams import group_stream

pytestmark = pytest.mark.integration
ENDS_WITHIN = 10.0  # seconds; the member's refusal count ends it after 3 refusals (~1 s)


@pytest.fixture
async def source(js: jetstream.JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    async with group_stream(js, unique_name("psx")) as name:
        yield name


@pytest.fixture
async def static_stream(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> AsyncIterator[str]:
    async with group_stream(js, unique_name("psy"), partitions=1) as name:
        yield name


async def test_a_member_whose_stream_is_deleted_ends_with_a_typed_error(
    js: jetstream.JetStream, source: str, static_stream: str
) -> None:
    await pcgroups.create_elastic(
        js, source, "g", max_members=1, filters=[PartitioningFilter(f"{source}.*", (1,))]
    )
    await pcgroups.add_members(js, source, "g", ["m1"])
    await pcgroups.create_static(js, static_stream, "g", max_members=1, members=["m1"])
    template = jetstream.ConsumerConfig(ack_wait=2)
    try:
        async with (
            pcgroups.consume_elastic(js, source, "g", "m1", config=template) as elastic,
            pcgroups.consume_static(js, static_stream, "g", "m1", config=template) as static,
        ):
            await js.delete_stream(pcgroups.wire.elastic_stream_name(source, "g"))
            await js.delete_stream(static_stream)
            for member in (elastic, static):
                with pytest.raises(pcgroups.MemberConsumerRefusedError) as refused:
                    await asyncio.wait_for(member.done(), ENDS_WITHIN)
                assert refused.value.code == 404 and refused.value.stream in str(refused.value)
    finally:  # the fixture deletes it
        await js.add_stream(jetstream.StreamConfig(name=static_stream, subjects=[static_stream]))
