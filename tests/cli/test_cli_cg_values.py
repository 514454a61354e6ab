"""``jetstore cg`` input parsing and the exit codes of the pcgroups errors."""

from __future__ import annotations

import click
import pytest

import pcgroups
from jetstore._cg_fields import group_fields, group_lines, parse_mapping, parse_partitioning
from jetstore._output import exit_code_for


def test_member_mappings() -> None:
    assert parse_mapping("a:0,2") == pcgroups.MemberMapping("a", (0, 2))
    assert parse_mapping("host:8080:1") == pcgroups.MemberMapping("host:8080", (1,))
    for bad in ("a", "a:", ":1", "a:1,", "a:x", "a=1", "a:-1"):
        with pytest.raises(click.BadParameter, match="MEMBER:PARTITION"):
            parse_mapping(bad)


def test_partitioning_filters() -> None:
    assert parse_partitioning("orders.*.*:1,2") == pcgroups.PartitioningFilter("orders.*.*", (1, 2))
    assert parse_partitioning("orders.>") == pcgroups.PartitioningFilter("orders.>", None)
    # a ':' not followed by wildcard numbers is part of the subject
    assert parse_partitioning("a:b.*") == pcgroups.PartitioningFilter("a:b.*", None)


def test_group_fields_and_lines() -> None:
    config = pcgroups.ElasticConfig(
        max_members=3,
        partitioning_filters=(pcgroups.PartitioningFilter("o.*", (1,)),),
        members=("b", "a"),
    )
    fields = group_fields("elastic", "S", "g", config)
    assert fields["partitions"] == {"b": [1], "a": [0, 2]}  # orbit's balanced order
    assert fields["filters"] == [{"filter": "o.*", "wildcards": [1]}]
    lines = group_lines(fields)
    assert "filters: o.*:1" in lines and "partitions: b:1 a:0,2" in lines
    assert "member_mappings: -" in lines


def test_pcgroups_exit_codes() -> None:
    assert exit_code_for(pcgroups.GroupNotFoundError("S", "g", "static")) == 1
    assert exit_code_for(pcgroups.MemberNotFoundError("S", "g", "m")) == 1
    assert exit_code_for(pcgroups.GroupExistsError("S", "g", "elastic")) == 1
    assert exit_code_for(pcgroups.GroupDeletedError("S", "g", "elastic")) == 1
    assert exit_code_for(pcgroups.InvalidGroupConfigError("bad")) == 2
    assert exit_code_for(pcgroups.InvalidMemberMappingError("bad")) == 2
    assert exit_code_for(pcgroups.InvalidPartitioningFilterError("bad")) == 2
    assert exit_code_for(pcgroups.InvalidGroupNameError("bad")) == 2
