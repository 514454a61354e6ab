"""Cutting a stream's sequences into the ranges Spark partitions read (kvstore._ranges)."""

from __future__ import annotations

import itertools

import pytest

from kvstore._ranges import LastCheck, split_range


@pytest.mark.parametrize(
    ("first", "last", "parts"),
    [(1, 10, 3), (1, 10, 10), (5, 5, 4), (7, 1_000_003, 8), (1, 3, 1024), (100, 199, 7)],
)
def test_ranges_cover_every_sequence_once_in_near_equal_parts(
    first: int, last: int, parts: int
) -> None:
    ranges = split_range(first, last, parts)
    covered = [seq for lo, hi in ranges for seq in range(lo, hi + 1)] if last < 10_000 else None
    if covered is not None:
        assert covered == list(range(first, last + 1))
    assert ranges[0][0] == first and ranges[-1][1] == last
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(ranges))
    sizes = [hi - lo + 1 for lo, hi in ranges]
    assert len(ranges) == min(parts, last - first + 1) and max(sizes) - min(sizes) <= 1


def test_an_empty_stream_has_no_ranges() -> None:
    assert split_range(1, 0, 4) == [] and split_range(11, 10, 1) == []


def test_the_last_revision_check_follows_history_and_direct_get() -> None:
    assert LastCheck.for_stream(1, allow_direct=False) is LastCheck.ONLY
    assert LastCheck.for_stream(5, allow_direct=True) is LastCheck.KEYS
    assert LastCheck.for_stream(-1, allow_direct=True) is LastCheck.KEYS
    assert LastCheck.for_stream(64, allow_direct=False) is LastCheck.SUFFIX
