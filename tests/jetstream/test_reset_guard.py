"""ResetGuard: an ordered consumer recreated at the same stream sequence, soon after its
creation, backs off and, when deliveries caused it, gives up after a bounded number of times;
progress or a consumer that lived long ends the streak."""

from __future__ import annotations

import pytest

from jetstream._consume.resets import MAX_RESETS_IN_PLACE, ResetGuard

WINDOW = 5.0


def test_a_first_reset_and_a_reset_after_progress_wait_for_nothing() -> None:
    guard = ResetGuard(WINDOW)
    guard.created(0.0)
    assert guard.reset(10, 0.1, delivery=True) == 0.0
    guard.created(0.2)
    assert guard.reset(11, 0.3, delivery=True) == 0.0  # it got past 10


def test_resets_in_place_back_off_more_and_more_up_to_five_seconds() -> None:
    guard = ResetGuard(WINDOW, limit=100)
    guard.created(0.0)
    assert guard.reset(7, 0.0, delivery=False) == 0.0
    waits = []
    for n in range(1, 12):
        guard.created(float(n))
        wait = guard.reset(7, n + 0.01, delivery=False)
        assert wait is not None
        waits.append(wait)
    assert waits[0] <= 0.5
    assert all(w <= 5.0 for w in waits)
    assert waits[-1] >= 2.5  # from the upper half of the 5 s ceiling
    assert guard.in_place == 11


def test_delivery_resets_in_place_give_up_after_the_limit() -> None:
    guard = ResetGuard(WINDOW)
    guard.created(0.0)
    assert guard.reset(3, 0.0, delivery=True) == 0.0
    outcomes = []
    for n in range(1, MAX_RESETS_IN_PLACE + 1):
        guard.created(float(n))
        outcomes.append(guard.reset(3, n + 0.01, delivery=True))
    assert None not in outcomes[:-1]
    assert outcomes[-1] is None


def test_connection_resets_in_place_never_give_up() -> None:
    guard = ResetGuard(WINDOW, limit=3)
    guard.created(0.0)
    for n in range(50):
        guard.created(float(n))
        assert guard.reset(3, n + 0.01, delivery=False) is not None


@pytest.mark.parametrize("lived", [WINDOW, WINDOW * 10])
def test_a_consumer_that_lived_past_the_window_starts_a_new_streak(lived: float) -> None:
    guard = ResetGuard(WINDOW, limit=2)
    guard.created(0.0)
    assert guard.reset(3, 0.0, delivery=True) == 0.0
    guard.created(1.0)
    assert guard.reset(3, 1.0, delivery=True) is not None
    guard.created(2.0)
    assert guard.reset(3, 2.0 + lived, delivery=True) == 0.0  # healthy meanwhile: no loop
    guard.created(10.0 + lived)
    assert guard.reset(3, 10.0 + lived, delivery=True) is not None
