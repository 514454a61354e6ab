"""The ordered consumer's re-create backoff: doubling, capped, and jittered."""

from __future__ import annotations

import pytest

from jetstream._consume.resets import reset_backoff


@pytest.mark.parametrize(
    ("attempt", "ceiling"), [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 5.0), (30, 5.0)]
)
def test_each_wait_is_in_the_upper_half_of_its_ceiling(attempt: int, ceiling: float) -> None:
    waits = [reset_backoff(attempt) for _ in range(200)]
    assert all(ceiling / 2 <= wait <= ceiling for wait in waits)
    assert len(set(waits)) > 100, "jittered: many clients do not retry in lockstep"
