"""Messages a group would leave unprocessed without any error are reported: a config edited
in the bucket so that ``max_members`` no longer matches the stream's partitioning makes
members refuse to start (``GroupConfigMismatchError``), and ``elastic_status`` /
``static_status`` list the partitions no member works on, with what waits there, members
whose names can never join, and the messages no filter selects.

Before: members started under the edited config and consumed their share while the rest
waited for good (20 of 40 messages for a 4-to-2 edit; 22 of 40 with a member named
``"b c"``), and nothing said which messages of the stream a group never receives."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

import msgspec
import pytest

import jetstream
import kvstore
import pcgroups
from pcgroups import PartitioningFilter
from tests.pcgroups.group_streams import group_stream

pytestmark = pytest.mark.integration
KEYS = 40


@pytest.fixture
async def stream(js: jetstream.JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    """A stream on ``<name>.>`` that allows direct get (so what waits can be counted)."""
    async with group_stream(js, unique_name("strand"), subjects=">", direct=True) as name:
        yield name


async def edit(js: jetstream.JetStream, bucket: str, key: str, config: object) -> None:
    """Rewrite a stored group config as another tool (orbit's ``cg``, a hand edit) would."""
    encode = (
        pcgroups.wire.encode_static_config
        if isinstance(config, pcgroups.StaticConfig)
        else pcgroups.wire.encode_elastic_config
    )
    await (await kvstore.open_bucket(js, bucket)).put(key, encode(config))  # type: ignore[arg-type]


async def publish(js: jetstream.JetStream, stream: str, subject: str = "{stream}.k{i}") -> None:
    for i in range(KEYS):
        await js.publish(subject.format(stream=stream, i=i), str(i).encode())


async def wait_for(condition: Callable[[], object], what: str) -> None:
    async with asyncio.timeout(20):
        while not await condition():  # type: ignore[misc]
            await asyncio.sleep(0.05)


async def queued(js: jetstream.JetStream, stream: str, count: int) -> bool:
    return (await js.stream_info(f"{stream}-g")).state.messages == count


async def test_an_elastic_config_edited_to_fewer_partitions_stops_members_from_starting(
    js: jetstream.JetStream, stream: str
) -> None:
    created = await pcgroups.create_elastic(js, stream, "g", max_members=4)
    await pcgroups.add_members(js, stream, "g", ["a", "b"])
    await publish(js, stream)
    await wait_for(lambda: queued(js, stream, KEYS), "the work queue holds every message")
    fewer = msgspec.structs.replace(created, max_members=2, members=("a", "b"))
    await edit(js, pcgroups.wire.ELASTIC_BUCKET, f"{stream}.g", fewer)

    member = pcgroups.consume_elastic(js, stream, "g", "a", lambda msg: None)
    with pytest.raises(pcgroups.GroupConfigMismatchError, match="into 4 partitions") as raised:
        async with member:
            pass
    assert "max_members 2" in str(raised.value) and raised.value.group == "g"

    status = await pcgroups.elastic_status(js, stream, "g")
    assert status.mismatch is not None and "into 4 partitions" in status.mismatch
    assert [(p.partition, p.member) for p in status.partitions] == [
        (0, "a"),
        (1, "b"),
        (2, None),
        (3, None),
    ]
    assert sum(p.waiting or 0 for p in status.partitions) == KEYS
    assert [p.partition for p in status.stranded if p.member is None] == [2, 3]
    assert all(p.waiting for p in status.stranded if p.member is None)


async def test_a_static_config_edited_to_fewer_partitions_stops_members_from_starting(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    async with group_stream(js, unique_name("strs"), partitions=4, direct=True) as stream:
        created = await pcgroups.create_static(js, stream, "g", max_members=4, members=["a"])
        await publish(js, stream)
        await edit(
            js,
            pcgroups.wire.STATIC_BUCKET,
            f"{stream}.g",
            msgspec.structs.replace(created, max_members=2),
        )
        with pytest.raises(pcgroups.GroupConfigMismatchError, match="into 4 partitions"):
            async with pcgroups.consume_static(js, stream, "g", "a", lambda msg: None):
                pass
        status = await pcgroups.static_status(js, stream, "g")
        assert status.mismatch is not None
        assert [p.member for p in status.partitions] == ["a", "a", None, None]
        assert sum(p.waiting or 0 for p in status.partitions) == KEYS
        assert status.unselected == 0


async def test_partitions_of_a_member_that_can_never_join_are_listed_as_stranded(
    js: jetstream.JetStream, stream: str, caplog: pytest.LogCaptureFixture
) -> None:
    """orbit stores any member name; ``"b c"`` cannot name a consumer, so its partitions
    are never processed: the running members warn, the status lists them with their
    messages."""
    created = await pcgroups.create_elastic(js, stream, "g", max_members=4)
    await edit(
        js,
        pcgroups.wire.ELASTIC_BUCKET,
        f"{stream}.g",
        msgspec.structs.replace(created, members=("a", "b c")),
    )
    handled: list[bytes] = []

    async def handle(msg: pcgroups.GroupMessage) -> None:
        handled.append(msg.data)
        await msg.ack()

    with caplog.at_level(logging.WARNING, logger="pcgroups"):
        async with pcgroups.consume_elastic(js, stream, "g", "a", handle) as member:
            await publish(js, stream)

            async def a_is_done() -> bool:
                if (await js.stream_info(f"{stream}-g")).state.last_seq < KEYS:
                    return False  # not all copied into the work queue yet
                status = await pcgroups.elastic_status(js, stream, "g")
                return all(p.waiting == 0 for p in status.partitions if p.member == "a")

            await wait_for(a_is_done, "member a has processed its partitions")
            status = await pcgroups.elastic_status(js, stream, "g")
            assert member.partitions == (0, 1)
    assert "'b c' cannot join" in caplog.text
    assert status.unjoinable == ("b c",)
    assert [(p.partition, p.member, p.consuming) for p in status.partitions] == [
        (0, "a", True),
        (1, "a", True),
        (2, "b c", False),
        (3, "b c", False),
    ]
    assert [p.partition for p in status.stranded] == [2, 3]
    assert sum(p.waiting or 0 for p in status.stranded) == KEYS - len(handled)
    assert 0 < len(handled) < KEYS


async def test_messages_no_partitioning_filter_selects_are_counted(
    js: jetstream.JetStream, stream: str
) -> None:
    """A group processes only the subjects its filters select: ``<s>.*`` leaves
    ``<s>.k.x`` in the stream, never copied into the work queue."""
    by_key = [PartitioningFilter(f"{stream}.*", (1,))]
    await pcgroups.create_elastic(js, stream, "g", max_members=2, filters=by_key)
    await pcgroups.add_members(js, stream, "g", ["a"])
    await publish(js, stream)
    await publish(js, stream, "{stream}.k{i}.x")
    await wait_for(lambda: queued(js, stream, KEYS), "the work queue holds what it selects")
    status = await pcgroups.elastic_status(js, stream, "g")
    assert status.unselected == KEYS
    assert status.mismatch is None and status.unjoinable == ()
    assert sum(p.waiting or 0 for p in status.partitions) == KEYS


async def test_a_stream_without_direct_get_is_reported_without_counts(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    async with group_stream(js, unique_name("strn"), partitions=2) as stream:
        await pcgroups.create_static(js, stream, "g", max_members=2, members=["a"])
        await publish(js, stream)
        status = await pcgroups.static_status(js, stream, "g")
    assert [(p.member, p.consuming, p.waiting) for p in status.partitions] == [
        ("a", False, None),
        ("a", False, None),
    ]
    assert status.unselected is None and len(status.stranded) == 2
