"""orbit.go's partition rules, with vectors derived by hand from its algorithm
(``GeneratePartitionFilters`` in stream_consumer_group.go, docs/PCGROUPS-WIRE.md section 5):

1. de-duplicate the members, sort them, keep the first P (P = max_members = partitions);
2. n = len(members), per = P // n; partition i < n*per goes to members[i // per];
3. each remaining partition i >= n*per goes to members[(i - n*per) % n].
"""

from __future__ import annotations

import hypothesis
import hypothesis.strategies as st
import pytest

import jetstream
import pcgroups
from pcgroups import (
    ElasticConfig,
    InvalidGroupConfigError,
    InvalidGroupNameError,
    InvalidMemberMappingError,
    InvalidPartitioningFilterError,
    MemberMapping,
    PartitioningFilter,
    StaticConfig,
)
from pcgroups._assign import validate_group_names, validate_member_name
from pcgroups.wire import (
    balanced_assignment,
    config_key,
    elastic_member_filters,
    elastic_stream_name,
    elastic_transforms,
    hash_partition,
    member_partitions,
    static_consumer_name,
    static_member_filters,
    transform_destination,
    validate_elastic_config,
    validate_static_config,
)

ASSIGNMENT_VECTORS = [
    # P=4, [b, a]: sorted a b, per 4//2=2, blocks 0-1 a, 2-3 b, no remainder
    (["b", "a"], 4, ("a", "a", "b", "b")),
    # P=7, [m3, m1, m2] (orbit's TestBaseFunctions): per 2, blocks 0-1 m1, 2-3 m2, 4-5 m3;
    # remainder 6: (6-6)%3=0 -> m1
    (["m3", "m1", "m2"], 7, ("m1", "m1", "m2", "m2", "m3", "m3", "m1")),
    # P=8, same members: per 2, blocks as above; remainder 6 -> m1, 7 -> (7-6)%3=1 -> m2
    (["m1", "m2", "m3"], 8, ("m1", "m1", "m2", "m2", "m3", "m3", "m1", "m2")),
    # P=10, [a b c d]: per 2, blocks 0-7; remainder 8 -> a, 9 -> b
    (["d", "c", "b", "a"], 10, ("a", "a", "b", "b", "c", "c", "d", "d", "a", "b")),
    # P=5, [a b c]: per 1, blocks 0 a, 1 b, 2 c; remainder 3 -> a, 4 -> b
    (["a", "b", "c"], 5, ("a", "b", "c", "a", "b")),
    # more members than partitions: P=2, sorted a b c d -> keep a b; per 1; c and d get none
    (["d", "c", "b", "a"], 2, ("a", "b")),
    # duplicates: [b a b a] -> a b; P=3, per 1: 0 a, 1 b; remainder 2 -> (2-2)%2=0 -> a
    (["b", "a", "b", "a"], 3, ("a", "b", "a")),
    # P=1, [z y] -> sorted y z -> keep y: y owns partition 0
    (["z", "y"], 1, ("y",)),
    # one member owns everything: per 3
    (["solo"], 3, ("solo", "solo", "solo")),
    # byte order, as Go sorts: "B" (0x42) < "a" (0x61) < "b"; per 1
    (["b", "B", "a"], 3, ("B", "a", "b")),
    # P=6, 4 members: per 1, blocks 0-3 a b c d; remainder 4 -> a, 5 -> b
    (["a", "b", "c", "d"], 6, ("a", "b", "c", "d", "a", "b")),
    # no members: nobody owns anything
    ([], 4, ()),
]


@pytest.mark.parametrize(("members", "partitions", "owners"), ASSIGNMENT_VECTORS)
def test_balanced_assignment_matches_orbit(
    members: list[str], partitions: int, owners: tuple[str, ...]
) -> None:
    assert balanced_assignment(members, partitions) == owners


def test_member_partitions_balanced_and_mapped() -> None:
    assert member_partitions(["d", "c", "b", "a"], 10, (), "a") == (0, 1, 8)
    assert member_partitions(["d", "c", "b", "a"], 2, (), "c") == ()
    mappings = (MemberMapping("a", (2, 0)), MemberMapping("b", (1,)))
    assert member_partitions([], 3, mappings, "a") == (2, 0)  # mapping order kept
    assert member_partitions([], 3, mappings, "zz") == ()


def test_static_filters_default_to_everything_after_the_partition() -> None:
    config = StaticConfig(max_members=4, members=("m1", "m2"))
    assert static_member_filters(config, "m1") == ("0.>", "1.>")
    assert static_member_filters(config, "m2") == ("2.>", "3.>")
    assert static_member_filters(config, "other") == ()


def test_filters_are_filter_major_like_orbit() -> None:
    # members m1 m2 over 4 partitions: m1 owns 0 1; one filter at a time, in config order
    config = StaticConfig(max_members=4, filters=("foo.*", "bar.>"), members=("m2", "m1"))
    assert static_member_filters(config, "m1") == ("0.foo.*", "1.foo.*", "0.bar.>", "1.bar.>")


def test_mapped_members_get_p_dot_gt_whatever_the_filters() -> None:
    # orbit writes "<p>.>" for mappings; with two filters it would repeat them (the server
    # refuses overlapping filters), we keep each once.
    mappings = (MemberMapping("a", (2, 0)), MemberMapping("b", (1,)))
    config = StaticConfig(max_members=3, filters=("x.*", "y.*"), member_mappings=mappings)
    assert static_member_filters(config, "a") == ("2.>", "0.>")
    assert static_member_filters(config, "b") == ("1.>",)


def test_elastic_member_filters_use_the_partitioning_filters() -> None:
    # orbit's TestBaseFunctions: foo.*.*.> over 7 partitions, members m1 m2 m3
    config = ElasticConfig(
        max_members=7,
        partitioning_filters=(PartitioningFilter("foo.*.*.>", (1, 2)),),
        members=("m1", "m2", "m3"),
    )
    assert elastic_member_filters(config, "m1") == ("0.foo.*.*.>", "1.foo.*.*.>", "6.foo.*.*.>")
    assert elastic_member_filters(config, "m3") == ("4.foo.*.*.>", "5.foo.*.*.>")
    whole = ElasticConfig(max_members=2, members=("m",))
    assert elastic_member_filters(whole, "m") == ("0.>", "1.>")


@pytest.mark.parametrize(
    ("pf", "partitions", "destination"),
    [
        # orbit's TestBaseFunctions vector
        (
            PartitioningFilter("foo.*.*.>", (1, 2)),
            4,
            "{{Partition(4,1,2)}}.foo.{{Wildcard(1)}}.{{Wildcard(2)}}.>",
        ),
        (
            PartitioningFilter("orders.*.*", (2,)),
            6,
            "{{Partition(6,2)}}.orders.{{Wildcard(1)}}.{{Wildcard(2)}}",
        ),
        # indexes in config order, not sorted
        (
            PartitioningFilter("orders.*.*", (2, 1)),
            6,
            "{{Partition(6,2,1)}}.orders.{{Wildcard(1)}}.{{Wildcard(2)}}",
        ),
        # no partitioning wildcards (nil or empty): hash the whole subject
        (PartitioningFilter("events.>", None), 3, "{{Partition(3)}}.events.>"),
        (PartitioningFilter("events.*", ()), 3, "{{Partition(3)}}.events.{{Wildcard(1)}}"),
    ],
)
def test_transform_destinations_match_orbit(
    pf: PartitioningFilter, partitions: int, destination: str
) -> None:
    assert transform_destination(pf, partitions) == destination


def test_elastic_transforms_one_per_filter_or_the_whole_stream() -> None:
    assert elastic_transforms(ElasticConfig(max_members=6)) == ((">", "{{Partition(6)}}.>"),)
    assert elastic_transforms(ElasticConfig(max_members=6, partitioning_filters=())) == (
        (">", "{{Partition(6)}}.>"),
    )
    two = ElasticConfig(
        max_members=2,
        partitioning_filters=(PartitioningFilter("a.*", (1,)), PartitioningFilter("b.>")),
    )
    assert elastic_transforms(two) == (
        ("a.*", "{{Partition(2,1)}}.a.{{Wildcard(1)}}"),
        ("b.>", "{{Partition(2)}}.b.>"),
    )


def test_hash_partition_is_fnv1a_32() -> None:
    # published FNV-1a 32-bit vectors; 2**32 partitions leaves the hash itself
    assert hash_partition(b"", 2**32) == 0x811C9DC5
    assert hash_partition(b"a", 2**32) == 0xE40C292C
    assert hash_partition(b"foobar", 2**32) == 0xBF9CF968
    assert hash_partition(b"foobar", 10) == 0xBF9CF968 % 10


def test_names() -> None:
    assert config_key("orders", "g") == "orders.g"
    assert elastic_stream_name("orders", "g") == "orders-g"
    assert static_consumer_name("g", "m1") == "g-m1"
    validate_group_names("orders", "g-1_x=")
    validate_member_name("g", "m-1")


@pytest.mark.parametrize(
    ("stream", "group"),
    [("", "g"), ("orders", ""), ("orders", "g.1"), ("or ders", "g"), ("o", "g*"), ("o", "g/1")],
)
def test_bad_stream_or_group_names(stream: str, group: str) -> None:
    with pytest.raises(InvalidGroupNameError) as info:
        validate_group_names(stream, group)
    assert isinstance(info.value, jetstream.InvalidNameError)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("member", ["", "m.1", "m 1", "m>", "m/1", "x" * 255])
def test_bad_member_names(member: str) -> None:
    with pytest.raises(InvalidGroupNameError):
        validate_member_name("g", member)


def test_valid_configs_pass() -> None:
    validate_static_config(StaticConfig(max_members=1))
    # orbit tolerates repeated members and more members than partitions
    validate_static_config(StaticConfig(max_members=2, members=("a", "a", "b", "c")))
    validate_static_config(
        StaticConfig(
            max_members=3, member_mappings=(MemberMapping("a", (0, 2)), MemberMapping("b", (1,)))
        )
    )
    validate_elastic_config(ElasticConfig(max_members=4))
    validate_elastic_config(
        ElasticConfig(
            max_members=4,
            partitioning_filters=(
                PartitioningFilter("a.*.*.>", (2, 1)),
                PartitioningFilter("b.>"),
                PartitioningFilter("c.*", ()),
            ),
        )
    )


@pytest.mark.parametrize("max_members", [0, -1, True, "3", 2.0])
def test_max_members_must_be_at_least_one(max_members: object) -> None:
    with pytest.raises(InvalidGroupConfigError):
        validate_static_config(StaticConfig(max_members=max_members))  # type: ignore[arg-type]
    with pytest.raises(InvalidGroupConfigError):
        validate_elastic_config(ElasticConfig(max_members=max_members))  # type: ignore[arg-type]


def test_members_and_mappings_are_exclusive() -> None:
    config = StaticConfig(
        max_members=1, members=("a",), member_mappings=(MemberMapping("a", (0,)),)
    )
    with pytest.raises(InvalidGroupConfigError, match="not both"):
        validate_static_config(config)
    elastic = ElasticConfig(
        max_members=1, members=("a",), member_mappings=(MemberMapping("a", (0,)),)
    )
    with pytest.raises(InvalidGroupConfigError, match="not both"):
        validate_elastic_config(elastic)


@pytest.mark.parametrize(
    "mappings",
    [
        (MemberMapping("a", (1, 1)),),  # a partition twice
        (MemberMapping("a", (0,)), MemberMapping("b", (0, 1))),  # overlap between members
        (MemberMapping("a", (0,)),),  # partition 1 not covered
        (MemberMapping("a", (0, 1, 2)),),  # 2 is out of range
        (MemberMapping("a", (-1, 0, 1)),),  # negative
        (MemberMapping("a", (0,)), MemberMapping("a", (1,))),  # member twice
        (MemberMapping("a", (0,)), MemberMapping("b", (1,)), MemberMapping("c", ())),  # 3 > 2
        (MemberMapping("a", (0, True)),),  # not an int
    ],
)
def test_mappings_must_cover_each_partition_exactly_once(
    mappings: tuple[MemberMapping, ...],
) -> None:
    with pytest.raises(InvalidMemberMappingError) as info:
        validate_elastic_config(ElasticConfig(max_members=2, member_mappings=mappings))
    assert isinstance(info.value, InvalidGroupConfigError)
    with pytest.raises(InvalidMemberMappingError):
        validate_static_config(StaticConfig(max_members=2, member_mappings=mappings))


@pytest.mark.parametrize(
    "pf",
    [
        PartitioningFilter(""),  # empty
        PartitioningFilter("foo.bar"),  # no '*' and no trailing '>'
        PartitioningFilter("foo.*", (2,)),  # only one '*'
        PartitioningFilter("foo.*", (0,)),  # indexes start at 1
        PartitioningFilter("foo.*.*", (1, 1)),  # repeated
        PartitioningFilter("foo.*", (1, 2)),  # more indexes than '*'
        PartitioningFilter("foo.>", (1,)),  # '>' is not a partitioning wildcard
        PartitioningFilter("foo.a*", ()),  # 'a*' is not a wildcard token
    ],
)
def test_partitioning_wildcards_must_exist_in_the_filter(pf: PartitioningFilter) -> None:
    with pytest.raises(InvalidPartitioningFilterError) as info:
        validate_elastic_config(ElasticConfig(max_members=2, partitioning_filters=(pf,)))
    assert isinstance(info.value, jetstream.ClientValidationError)


def test_elastic_stream_config_is_orbits() -> None:
    # CreateElastic: <stream>-<group>, work queue, source's replicas and storage, buffered
    # limits with discard new, direct get, one source with the partitioning transforms
    source = jetstream.StreamConfig(name="orders", num_replicas=3, storage="memory")
    config = ElasticConfig(
        max_members=4,
        partitioning_filters=(PartitioningFilter("orders.*", (1,)),),
        max_buffered_msgs=500,
    )
    stream = pcgroups.wire.elastic_stream_config("orders", "g", config, source)
    assert (stream.name, stream.subjects, stream.retention) == ("orders-g", [], "workqueue")
    assert (stream.num_replicas, stream.storage) == (3, "memory")
    assert (stream.max_msgs, stream.max_bytes, stream.discard) == (500, -1, "new")
    assert stream.allow_direct
    assert stream.sources == [
        {
            "name": "orders",
            "subject_transforms": [
                {"src": "orders.*", "dest": "{{Partition(4,1)}}.orders.{{Wildcard(1)}}"}
            ],
        }
    ]


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(
    members=st.lists(st.text(alphabet="abcdefXYZ0", min_size=1, max_size=3), max_size=12),
    partitions=st.integers(min_value=1, max_value=40),
)
def test_balanced_assignment_properties(members: list[str], partitions: int) -> None:
    owners = balanced_assignment(members, partitions)
    taking_part = sorted(set(members))[:partitions]
    if not taking_part:
        assert owners == ()
        return
    # every partition has exactly one owner, one of the first P sorted members
    assert len(owners) == partitions
    assert set(owners) == set(taking_part)
    # balanced: counts differ by at most one, and the extra ones go to the first members
    counts = [owners.count(m) for m in taking_part]
    assert max(counts) - min(counts) <= 1
    assert counts == sorted(counts, reverse=True)
    # each member's filters name exactly its partitions, and members' filters are disjoint
    config = StaticConfig(max_members=partitions, members=tuple(members))
    filters = [f for m in taking_part for f in static_member_filters(config, m)]
    assert sorted(filters) == sorted(f"{p}.>" for p in range(partitions))
