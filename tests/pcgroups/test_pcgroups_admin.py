"""Static group administration on a real server: configs land in ``static-consumer-groups``
under ``<stream>.<group>`` exactly as orbit.go writes them (docs/PCGROUPS-WIRE.md), are read
back (ours and orbit-shaped ones), and bad input raises typed errors with nothing written."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Callable

import pytest
from nats.js import JetStreamContext

import jetstream
import kvstore
import pcgroups
from pcgroups import MemberMapping, StaticConfig
from tests.pcgroups.group_streams import group_stream

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


@pytest.fixture
async def stream(js: jetstream.JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    """A stream partitioned into 4 like orbit's static setup script: ``<s>.<key>`` is stored
    as ``<p>.<s>.<key>``. Its groups and the stream are removed after the test."""
    async with group_stream(js, unique_name("pcg"), partitions=4) as name:
        yield name


async def stored(js: jetstream.JetStream, stream: str, group: str) -> bytes | None:
    bucket = await kvstore.open_bucket(js, pcgroups.wire.STATIC_BUCKET)
    try:
        return (await bucket.get(f"{stream}.{group}")).value
    except kvstore.KeyNotFoundError:
        return None


async def test_create_writes_orbits_json_under_stream_dot_group(
    js: jetstream.JetStream, stream: str, peer: JetStreamContext
) -> None:
    config = await pcgroups.create_static(
        js, stream, "g", max_members=4, filters=[f"{stream}.>"], members=["m1", "m2"]
    )
    assert config == StaticConfig(max_members=4, filters=(f"{stream}.>",), members=("m1", "m2"))
    # json.Marshal of orbit's StaticConsumerGroupConfig, '>' HTML-escaped as Go does
    expected = (
        b'{"max_members":4,"filters":["' + stream.encode() + b'.\\u003e"],"members":["m1","m2"]}'
    )
    assert await stored(js, stream, "g") == expected
    # a peer client (nats-py) reads it from the same bucket and key
    entry = await (await peer.key_value(pcgroups.wire.STATIC_BUCKET)).get(f"{stream}.g")
    assert entry.value == expected
    # the bucket is what orbit's CreateKeyValue makes: file storage, one value per key
    status = await (await kvstore.open_bucket(js, pcgroups.wire.STATIC_BUCKET)).status()
    assert (status.config.history, status.config.storage) == (1, "file")
    assert await pcgroups.static_config(js, stream, "g") == config


async def test_orbit_written_configs_are_read(js: jetstream.JetStream, stream: str) -> None:
    await pcgroups.create_static(js, stream, "seed", max_members=1, members=["m"])  # the bucket
    bucket = await kvstore.open_bucket(js, pcgroups.wire.STATIC_BUCKET)
    await bucket.put(f"{stream}.balanced", (FIXTURES / "static_balanced.json").read_bytes())
    await bucket.put(f"{stream}.mapped", (FIXTURES / "static_mapped.json").read_bytes())
    assert await pcgroups.static_config(js, stream, "balanced") == StaticConfig(
        max_members=4, filters=("orders.>",), members=("m1", "m2")
    )
    mapped = await pcgroups.static_config(js, stream, "mapped")
    assert mapped.member_mappings == (MemberMapping("a", (0, 2)), MemberMapping("b", (1,)))
    assert pcgroups.wire.static_member_filters(mapped, "a") == ("0.>", "2.>")
    assert await pcgroups.list_static(js, stream) == ["balanced", "mapped", "seed"]


async def test_list_is_per_stream(js: jetstream.JetStream, stream: str) -> None:
    await pcgroups.create_static(js, stream, "a", max_members=2, members=["m"])
    await pcgroups.create_static(js, stream, "b", max_members=2, members=["m"])
    assert [g async for g in pcgroups.list_static(js, stream)] == ["a", "b"]
    assert [g async for g in pcgroups.list_static(js, stream + "x")] == []


async def test_create_again_same_config_is_a_no_op_other_config_is_refused(
    js: jetstream.JetStream, stream: str
) -> None:
    mappings = [MemberMapping("a", (0, 2)), MemberMapping("b", (1, 3))]
    first = await pcgroups.create_static(js, stream, "g", max_members=4, member_mappings=mappings)
    before = await stored(js, stream, "g")
    again = await pcgroups.create_static(js, stream, "g", max_members=4, member_mappings=mappings)
    assert again == first
    with pytest.raises(pcgroups.GroupExistsError):
        await pcgroups.create_static(js, stream, "g", max_members=4, members=["a", "b"])
    with pytest.raises(pcgroups.GroupExistsError):
        await pcgroups.create_static(
            js, stream, "g", max_members=4, member_mappings=mappings, filters=["x.>"]
        )
    assert await stored(js, stream, "g") == before


@pytest.mark.parametrize(
    ("group", "options", "error"),
    [
        ("g.x", {"max_members": 2, "members": ["m"]}, pcgroups.InvalidGroupNameError),
        ("g", {"max_members": 0, "members": ["m"]}, pcgroups.InvalidGroupConfigError),
        ("g", {"max_members": 2, "members": ["m.1"]}, pcgroups.InvalidGroupNameError),
        ("g", {"max_members": 2, "members": ["m", "m"]}, pcgroups.InvalidGroupConfigError),
        ("g", {"max_members": 2, "filters": ["a b"]}, pcgroups.InvalidGroupConfigError),
        ("g", {"max_members": 2, "filters": "a.>"}, pcgroups.InvalidGroupConfigError),
        ("g", {"max_members": 2, "members": "m1"}, pcgroups.InvalidGroupConfigError),
        ("g", {"max_members": 2, "members": 7}, pcgroups.InvalidGroupConfigError),
        (
            "g",
            {"max_members": 2, "members": ["a"], "member_mappings": [MemberMapping("a", (0, 1))]},
            pcgroups.InvalidGroupConfigError,
        ),
        (
            "g",
            {"max_members": 3, "member_mappings": [MemberMapping("a", (0, 1))]},
            pcgroups.InvalidMemberMappingError,
        ),
    ],
)
async def test_bad_input_raises_typed_errors_and_writes_nothing(
    js: jetstream.JetStream,
    stream: str,
    group: str,
    options: dict[str, object],
    error: type[Exception],
) -> None:
    await pcgroups.create_static(js, stream, "seed", max_members=1, members=["m"])
    with pytest.raises(error) as info:
        await pcgroups.create_static(js, stream, group, **options)  # type: ignore[arg-type]
    assert isinstance(info.value, jetstream.ClientValidationError)
    assert [g async for g in pcgroups.list_static(js, stream)] == ["seed"]


async def test_a_missing_stream_writes_nothing(js: jetstream.JetStream, stream: str) -> None:
    with pytest.raises(jetstream.StreamNotFoundError):
        await pcgroups.create_static(js, stream + "missing", "g", max_members=2, members=["m"])
    assert [g async for g in pcgroups.list_static(js, stream + "missing")] == []


async def test_missing_and_corrupt_configs_raise_typed_errors(
    js: jetstream.JetStream, stream: str
) -> None:
    with pytest.raises(pcgroups.GroupNotFoundError):
        await pcgroups.static_config(js, stream, "nope")
    with pytest.raises(pcgroups.GroupNotFoundError):
        await pcgroups.delete_static(js, stream, "nope")
    await pcgroups.create_static(js, stream, "seed", max_members=1, members=["m"])
    bucket = await kvstore.open_bucket(js, pcgroups.wire.STATIC_BUCKET)
    await bucket.put(f"{stream}.junk", b"{not json")
    await bucket.put(f"{stream}.broken", b'{"max_members":0}')
    for group in ("junk", "broken"):
        with pytest.raises(pcgroups.CorruptGroupConfigError):
            await pcgroups.static_config(js, stream, group)
        with pytest.raises(pcgroups.CorruptGroupConfigError):
            await pcgroups.create_static(js, stream, group, max_members=1, members=["m"])
    await pcgroups.delete_static(js, stream, "junk")  # a corrupt group can still be deleted
    assert "junk" not in [g async for g in pcgroups.list_static(js, stream)]


async def test_delete_tombstones_the_config_and_removes_only_its_members_consumers(
    js: jetstream.JetStream, stream: str
) -> None:
    await pcgroups.create_static(js, stream, "a", max_members=4, members=["m1", "m2", "idle"])
    await pcgroups.create_static(js, stream, "a-b", max_members=4, members=["m1"])
    # durables as members create them (orbit: <group>-<member>); "a-b-m1" belongs to "a-b"
    for name in ("a-m1", "a-m2", "a-b-m1"):
        await js.create_consumer(
            stream, jetstream.ConsumerConfig(durable_name=name, ack_policy="explicit")
        )
    await pcgroups.delete_static(js, stream, "a")
    names = [name async for name in js.consumer_names(stream)]
    assert names == ["a-b-m1"]
    assert [g async for g in pcgroups.list_static(js, stream)] == ["a-b"]
    with pytest.raises(pcgroups.GroupNotFoundError):
        await pcgroups.static_config(js, stream, "a")
    # a DEL tombstone, which orbit's members treat as a normal end
    bucket = await kvstore.open_bucket(js, pcgroups.wire.STATIC_BUCKET)
    history = [entry async for entry in bucket.history(f"{stream}.a")]
    assert history[-1].op is kvstore.Op.DELETE
    # the group can be created again after a delete
    await pcgroups.create_static(js, stream, "a", max_members=2, members=["m1"])


async def test_partition_numbers_are_the_servers(js: jetstream.JetStream, stream: str) -> None:
    # the stream's {{partition(4,1)}} and our hash_partition agree (FNV-1a 32 of the token)
    for key in ("alice", "bob", "carol", "dave", "erin", "frank", "k1", "k22"):
        ack = await js.publish(f"{stream}.{key}", b"x")
        message = await js.get_message(stream, ack.seq, direct=False)
        assert message.subject == f"{pcgroups.wire.hash_partition(key.encode(), 4)}.{stream}.{key}"
