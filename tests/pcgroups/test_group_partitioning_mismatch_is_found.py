"""What strands a group's messages, told from the config and the stream's partitioning alone:
a work queue (or a static stream's subject transform) splitting into another number of
partitions than ``max_members``, a work queue copying other subjects than the partitioning
filters select, and member names no consumer can have."""

from __future__ import annotations

import pcgroups
from pcgroups import ElasticConfig, MemberMapping, PartitioningFilter, StaticConfig
from pcgroups._status import (
    _elastic_mismatch,
    _static_mismatch,
    partition_count,
    unjoinable_members,
)


def test_the_partition_count_is_read_from_a_transform_destination() -> None:
    assert partition_count("{{Partition(4,1)}}.orders.{{Wildcard(1)}}") == 4
    assert partition_count("{{partition(3)}}.>") == 3
    assert partition_count("{{ partition( 12 , 1) }}.x") == 12
    assert partition_count("{{wildcard(1)}}.x") is None
    assert partition_count("") is None


def test_a_work_queue_made_for_the_config_agrees_with_it() -> None:
    config = ElasticConfig(max_members=4, partitioning_filters=(PartitioningFilter("o.*", (1,)),))
    assert _elastic_mismatch(config, list(pcgroups.wire.elastic_transforms(config)), "O-g") is None
    whole = ElasticConfig(max_members=2)  # no filters: the whole stream by subject
    assert _elastic_mismatch(whole, list(pcgroups.wire.elastic_transforms(whole)), "O-g") is None


def test_a_config_edited_after_the_work_queue_was_made_disagrees() -> None:
    made = ElasticConfig(max_members=4, partitioning_filters=(PartitioningFilter("o.*", (1,)),))
    queue = list(pcgroups.wire.elastic_transforms(made))
    fewer = ElasticConfig(max_members=2, partitioning_filters=made.partitioning_filters)
    assert _elastic_mismatch(fewer, queue, "O-g") == (
        "the work queue O-g splits messages into 4 partitions, the config has max_members 2"
    )
    other = ElasticConfig(max_members=4, partitioning_filters=(PartitioningFilter("p.*", (1,)),))
    assert "copies ['o.*']" in (_elastic_mismatch(other, queue, "O-g") or "")
    # which wildcards choose the partition moves keys between partitions, stranding none
    rehashed = ElasticConfig(max_members=4, partitioning_filters=(PartitioningFilter("o.*"),))
    assert _elastic_mismatch(rehashed, queue, "O-g") is None


def test_a_static_config_must_match_the_streams_partition_transform() -> None:
    config = StaticConfig(max_members=2, members=("a",))
    assert _static_mismatch(config, None, "S") is None  # publishers put the partition in
    assert _static_mismatch(config, 2, "S") is None
    assert "into 4 partitions" in (_static_mismatch(config, 4, "S") or "")


def test_members_no_consumer_can_be_named_after_are_found_with_their_partitions() -> None:
    balanced = ElasticConfig(max_members=4, members=("a", "b c", ""))  # "", a, b c, ""
    assert unjoinable_members(balanced, "g") == {"": (0, 3), "b c": (2,)}
    mapped = StaticConfig(
        max_members=2, member_mappings=(MemberMapping("a", (0,)), MemberMapping("x.y", (1,)))
    )
    assert unjoinable_members(mapped, "g") == {"x.y": (1,)}
