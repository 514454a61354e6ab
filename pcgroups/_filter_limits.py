"""What the server refuses of a group's filters, checked before anything is written: filters
one of which covers another, and more filter subjects on one member's consumer than the
server can take. No I/O.

The server compares every pair of a consumer's filter subjects when it creates it (and when
it recovers it at a restart): on the 2-core test machine a member consumer with 2,048 filters
took 0.36 s to create, 4,096 took 1.4 s, 8,000 took 5.2 s, and 20,000 were never answered
within the request's retry deadline, each retry costing the server as much again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from ._assign import static_member_filters
from ._errors import InvalidGroupConfigError, InvalidPartitioningFilterError
from ._models import StaticConfig

__all__ = [
    "MAX_MEMBER_FILTERS",
    "check_covering",
    "check_elastic_filters",
    "check_filter_count",
    "check_filters_fit",
    "check_static_filters",
    "covering_pair",
    "subject_is_subset",
]

MAX_MEMBER_FILTERS: Final = 2048
"""The most filter subjects a member's consumer may have (the partitions it owns times the
group's filters): a group whose partitions and filters could give one member more is refused
(:class:`InvalidGroupConfigError`), and so is a config that gives a member more."""
_REQUEST_SLACK: Final = 2048  # bytes of a consumer create request beside its filters


def subject_is_subset(subject: str, test: str) -> bool:
    """Whether every subject ``subject`` matches is matched by ``test`` (both may hold
    wildcards): the server's ``subjectIsSubsetMatch``, which refuses a consumer (10138) or a
    stream's source transforms (10147) when one filter is a subset of another."""
    tokens, tests = subject.split("."), test.split(".")
    for index, wanted in enumerate(tests):
        if index >= len(tokens):
            return False
        if wanted == ">":
            return True
        token = tokens[index]
        if token == ">":
            return False
        if token == "*":
            if wanted != "*":
                return False
        elif wanted != "*" and token != wanted:
            return False
    return len(tokens) == len(tests)


def covering_pair(filters: Sequence[str]) -> tuple[str, str] | None:
    """The first ``(a, b)`` of ``filters`` where ``b`` covers ``a`` (every subject of ``a``
    matches ``b``), or None: the server refuses such a list."""
    for i, first in enumerate(filters):
        for j, second in enumerate(filters):
            if i != j and subject_is_subset(first, second):
                return first, second
    return None


def check_filter_count(count: int, what: str) -> None:
    """Refuse ``count`` filter subjects for one member consumer over the limit.

    Raises:
        InvalidGroupConfigError: ``count`` is over :data:`MAX_MEMBER_FILTERS`; the message
            starts with ``what`` (where the count comes from).
    """
    if count > MAX_MEMBER_FILTERS:
        raise InvalidGroupConfigError(
            f"{what}: {count:,} filter subjects on one member's consumer, more than the "
            f"{MAX_MEMBER_FILTERS:,} it may have (pcgroups.MAX_MEMBER_FILTERS): the server "
            "compares every pair of them when it creates the consumer, in time growing with "
            "the square"
        )


def check_filters_fit(filters: Sequence[str], max_payload: int) -> None:
    """Refuse member filters whose consumer create request cannot fit the server's
    ``max_payload``.

    Raises:
        InvalidGroupConfigError: the filters alone take more.
    """
    size = len(msgspec.json.encode(list(filters))) + _REQUEST_SLACK
    if size > max_payload:
        raise InvalidGroupConfigError(
            f"a member's filter subjects take {size:,} bytes in its consumer create request, "
            f"more than the server's max_payload ({max_payload:,})"
        )


def check_covering(
    filters: Sequence[str], error: type[InvalidGroupConfigError] = InvalidGroupConfigError
) -> None:
    """Refuse filters one of which covers another.

    Raises:
        InvalidGroupConfigError: ``error`` (a subclass) naming the two.
    """
    pair = covering_pair(filters)
    if pair is not None:
        raise error(
            f"filter {pair[1]!r} covers filter {pair[0]!r} (it matches every subject "
            f"{pair[0]!r} does): the server refuses them together"
        )


def check_elastic_filters(max_members: int, filters: Sequence[str], max_payload: int) -> None:
    """Refuse an elastic group whose member's consumer the server would refuse: filters
    covering one another, or, for a member owning every partition (the first member alone
    does, and any member may come to), too many filter subjects or bytes.

    Raises:
        InvalidPartitioningFilterError: filters covering one another.
        InvalidGroupConfigError: too many filter subjects or bytes for one member.
    """
    check_covering(filters, InvalidPartitioningFilterError)
    per_partition = max(1, len(filters))
    check_filter_count(
        max_members * per_partition,
        f"{max_members} partitions x {per_partition} filter(s), all owned by one member",
    )
    everything = [f"{p}.{f}" for f in filters or (">",) for p in range(max_members)]
    check_filters_fit(everything, max_payload)


def check_static_filters(config: StaticConfig, max_payload: int) -> None:
    """Refuse a static group whose members' consumers the server would refuse: filters
    covering one another, or a member (its membership is fixed: the one with the most
    partitions) with too many filter subjects or bytes.

    Raises:
        InvalidGroupConfigError: which of these it is.
    """
    if config.member_mappings:  # orbit gives mapped members "<p>.>" whatever the filters
        biggest = max(config.member_mappings, key=lambda m: len(m.partitions))
        member, count = biggest.member, len(biggest.partitions)
    elif config.members:
        check_covering(config.filters)
        ordered = sorted(set(config.members))  # the first gets the remainder's partition too
        member = ordered[0]
        count = -(-config.max_members // min(len(ordered), config.max_members))
        count *= max(1, len(config.filters))
    else:
        return  # nobody consumes
    check_filter_count(count, f"member {member!r} of the static group")
    check_filters_fit(static_member_filters(config, member), max_payload)
