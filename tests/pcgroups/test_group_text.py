"""Group configs and statuses print as short summaries, one partition a line, names another
client stored escaped; ``repr()`` stays precise."""

from __future__ import annotations

from pcgroups import (
    ElasticConfig,
    GroupStatus,
    MemberMapping,
    PartitioningFilter,
    PartitionStatus,
    StaticConfig,
)


def test_static_configs_print_their_partitions_filters_and_members() -> None:
    balanced = StaticConfig(max_members=3, filters=("orders.>",), members=("a", "b"))
    assert str(balanced) == "\n".join(
        ["Static group config: 3 partitions", "  filters: orders.>", "  members: a, b"]
    )
    mapped = StaticConfig(
        max_members=3, member_mappings=(MemberMapping("a", (0, 2)), MemberMapping("b", (1,)))
    )
    assert str(mapped) == "\n".join(
        ["Static group config: 3 partitions", "  mappings: a: 0, 2; b: 1"]
    )
    assert repr(balanced).startswith("StaticConfig(max_members=3, filters=('orders.>',)")


def test_elastic_configs_print_how_they_partition() -> None:
    config = ElasticConfig(
        max_members=4,
        partitioning_filters=(
            PartitioningFilter("orders.*", (1,)),
            PartitioningFilter("events.*.*", (1, 2)),
            PartitioningFilter("logs.>"),
        ),
        max_buffered_msgs=1000,
        members=("a", "b"),
    )
    assert str(config) == "\n".join(
        [
            "Elastic group config: 4 partitions",
            "       filters: orders.* (by wildcard 1); events.*.* (by wildcards 1, 2);"
            " logs.> (by the whole subject)",
            "  max buffered: 1000 messages",
            "       members: a, b",
        ]
    )
    whole = ElasticConfig(max_members=2, max_buffered_bytes=2**20)
    assert str(whole) == "\n".join(
        [
            "Elastic group config: 2 partitions",
            "       filters: every subject (by the whole subject)",
            "  max buffered: 1.0 MiB",
        ]
    )


def test_a_group_status_prints_one_partition_a_line() -> None:
    status = GroupStatus(
        kind="elastic",
        stream="ORDERS",
        group="g",
        partitions=(
            PartitionStatus(0, "a", True, 0),
            PartitionStatus(1, "b\x1b[2J", False, 5),
            PartitionStatus(2, None, False, None),
        ),
        unselected=2,
        mismatch=None,
        unjoinable=("b\x1b[2J",),
    )
    assert str(status) == "\n".join(
        [
            "Elastic group g on stream ORDERS",
            "  partition 0: a, consuming, 0 waiting",
            "  partition 1: 'b\\x1b[2J', not consuming, 5 waiting",
            "  partition 2: no member, not counted",
            "   unselected: 2 messages",
            "   unjoinable: 'b\\x1b[2J'",
        ]
    )
    assert repr(status).startswith("GroupStatus(kind='elastic', stream='ORDERS', group='g', ")
