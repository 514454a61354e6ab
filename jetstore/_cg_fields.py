"""``jetstore cg`` values: member mappings and partitioning filters from the command line,
and the documented fields of a group and of a consumed message (docs/CLI.md)."""

from __future__ import annotations

import base64
import re
from typing import Any

import click

import pcgroups

from ._shown import shown, text_of

__all__ = [
    "group_fields",
    "group_lines",
    "mapping_option",
    "message_fields",
    "partitioning_option",
]

_NUMBERS = re.compile(r"^\d+(,\d+)*$")


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in text.split(","))


def parse_mapping(text: str) -> pcgroups.MemberMapping:
    """``member:0,1,2`` as a mapping of those partitions to ``member``.

    Raises:
        click.BadParameter: not ``NAME:P[,P...]``.
    """
    member, sep, numbers = text.rpartition(":")
    if not sep or not member or not _NUMBERS.match(numbers):
        raise click.BadParameter(f"{text!r} is not MEMBER:PARTITION[,PARTITION...] (e.g. a:0,1)")
    return pcgroups.MemberMapping(member, _numbers(numbers))


def mapping_option(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[pcgroups.MemberMapping, ...]:
    """A repeatable ``MEMBER:P,P`` option or argument."""
    return tuple(parse_mapping(text) for text in values)


def parse_partitioning(text: str) -> pcgroups.PartitioningFilter:
    """``orders.*.*:1,2`` (the ``*`` tokens, counted from 1, that choose the partition) or a
    bare subject (the whole subject is hashed). A ``:`` followed by numbers at the end is
    always the wildcard list (a subject token may contain ``:`` elsewhere)."""
    subject, sep, numbers = text.rpartition(":")
    if sep and _NUMBERS.match(numbers):
        return pcgroups.PartitioningFilter(subject, _numbers(numbers))
    return pcgroups.PartitioningFilter(text, None)


def partitioning_option(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[pcgroups.PartitioningFilter, ...] | None:
    """The repeatable ``--filter`` of an elastic group; none given = the whole stream."""
    return tuple(parse_partitioning(text) for text in values) or None


def group_fields(
    kind: str, stream: str, group: str, config: pcgroups.StaticConfig | pcgroups.ElasticConfig
) -> dict[str, Any]:
    """A group's documented fields: its config, and the partitions each member owns."""
    fields: dict[str, Any] = {"kind": kind, "stream": stream, "group": group}
    fields["max_members"] = config.max_members
    if isinstance(config, pcgroups.StaticConfig):
        fields["filters"] = list(config.filters)
    else:
        filters = config.partitioning_filters
        fields["filters"] = None if filters is None else [_filter(f) for f in filters]
        fields["max_buffered_msgs"] = config.max_buffered_msgs
        fields["max_buffered_bytes"] = config.max_buffered_bytes
    fields["members"] = list(config.members)
    fields["member_mappings"] = [
        {"member": m.member, "partitions": list(m.partitions)} for m in config.member_mappings
    ]
    names = config.members or tuple(m.member for m in config.member_mappings)
    fields["partitions"] = {
        name: list(
            pcgroups.wire.member_partitions(
                config.members, config.max_members, config.member_mappings, name
            )
        )
        for name in dict.fromkeys(names)
    }
    return fields


def _filter(pf: pcgroups.PartitioningFilter) -> dict[str, Any]:
    wildcards = pf.partitioning_wildcards
    return {"filter": pf.filter, "wildcards": None if wildcards is None else list(wildcards)}


def group_lines(fields: dict[str, Any]) -> list[str]:
    """The fields as ``name: value`` lines, lists joined (``-`` for none), server text
    (member names, filters) escaped."""
    return [f"{name}: {shown(_plain(name, value))}" for name, value in fields.items()]


def _plain(name: str, value: Any) -> str:
    if name == "filters" and value and isinstance(value[0], dict):
        return ", ".join(_filter_text(f) for f in value)
    if name == "member_mappings":
        return " ".join(f"{m['member']}:{_ints(m['partitions'])}" for m in value) or "-"
    if name == "partitions":
        return " ".join(f"{member}:{_ints(p)}" for member, p in value.items()) or "-"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "-"
    return "-" if value is None else str(value)


def _filter_text(f: dict[str, Any]) -> str:
    return f["filter"] if not f["wildcards"] else f"{f['filter']}:{_ints(f['wildcards'])}"


def _ints(values: list[int]) -> str:
    return ",".join(str(v) for v in values) or "-"


def message_fields(message: pcgroups.GroupMessage) -> dict[str, Any]:
    """A consumed message's documented fields."""
    meta = message.raw.metadata
    value = text_of(message.data)
    return {
        "partition": message.partition,
        "subject": message.subject,
        "stream_sequence": meta.stream_seq,
        "delivered": meta.delivered,
        "size": len(message.data),
        "data": value,
        "data_base64": base64.b64encode(message.data).decode(),
    }
