"""The window accounting of consume (ADR-37 "Buffering messages") as pure state: when a pull
goes out, how large it is, and the rules that keep consume progressing without a pull storm."""

from __future__ import annotations

import json

import pytest

from jetstream import ClientValidationError
from jetstream._consume.pull import parse_exceeded
from jetstream._consume.pull_options import fetch_options, pull_options, sized_options
from jetstream._consume.pull_window import Limit, PullRequest, PullWindow


def _window(**options: object) -> PullWindow:
    return PullWindow(pull_options(**options))  # type: ignore[arg-type]


def test_the_first_pull_fills_the_buffer_and_counts_as_pending() -> None:
    window = _window(max_messages=100)
    pull = window.request(0.0)
    assert pull == PullRequest(batch=100, max_bytes=0, expires=30.0, heartbeat=15.0)
    assert window.pending_msgs == 100
    assert window.request(0.0) is None, "asked for only once"


def test_a_re_pull_waits_for_the_threshold_and_asks_for_the_room() -> None:
    window = _window(max_messages=10)  # threshold 5
    assert window.request(0.0) is not None
    for _ in range(4):
        window.delivered(0)
        window.taken(0)
    assert window.request(0.0) is None, "6 outstanding > threshold 5"
    window.delivered(0)
    window.taken(0)
    pull = window.request(0.0)
    assert pull is not None and pull.batch == 5


def test_buffered_messages_count_until_taken() -> None:
    window = _window(max_messages=4, threshold_messages=3)
    assert window.request(0.0) is not None
    for _ in range(4):
        window.delivered(0)
    assert window.outstanding_msgs == 4 and window.request(0.0) is None
    window.taken(0)
    assert window.request(0.0) == PullRequest(1, 0, 30.0, 15.0)


def test_max_messages_1_with_the_default_threshold_never_gets_stuck() -> None:
    window = _window(max_messages=1)  # threshold 0
    for _ in range(3):
        pull = window.request(0.0)
        assert pull is not None and pull.batch == 1
        window.delivered(0)
        window.taken(0)


def test_a_threshold_equal_to_the_limit_never_sends_a_batch_of_0() -> None:
    window = _window(max_messages=10, threshold_messages=10)
    assert window.request(0.0) is not None
    assert window.request(0.0) is None, "no room: no pull (was batch 0)"
    window.delivered(0)
    window.taken(0)
    pull = window.request(0.0)
    assert pull is not None and pull.batch == 1


def test_a_pull_status_gives_back_what_it_did_not_deliver() -> None:
    window = _window(max_messages=10)
    assert window.request(0.0) is not None
    window.delivered(0)
    assert window.ended(9, 0, 1.0) is False
    assert window.pending_msgs == 0 and window.outstanding_msgs == 1
    pull = window.request(1.0)
    assert pull is not None and pull.batch == 9, "an expired pull is re-sent at once"


def test_bytes_mode_pulls_a_large_batch_and_the_byte_room() -> None:
    window = _window(max_bytes=1000)
    pull = window.request(0.0)
    assert pull is not None and (pull.batch, pull.max_bytes) == (1_000_000, 1000)
    assert json.loads(pull.encode())["max_bytes"] == 1000
    window.delivered(300)
    window.taken(300)
    assert window.request(0.0) is None, "700 outstanding > threshold 500"
    window.delivered(300)
    window.taken(300)
    pull = window.request(0.0)
    assert pull is not None and pull.max_bytes == 600


def test_no_pull_is_smaller_than_a_message_known_not_to_fit() -> None:
    # threshold == max_bytes used to re-pull whatever room was left: 20,724 pulls in 3 s.
    window = _window(max_bytes=1000, threshold_bytes=1000)
    assert window.request(0.0) is not None
    for _ in range(9):
        window.delivered(100)
    window.taken(100)
    small = window.request(0.0)
    assert small is not None and small.max_bytes == 100
    assert window.ended(1_000_000, 100, 0.0, too_large=True) is False  # next message > 100
    for now in (1.0, 2.0, 3.0):
        assert window.request(now) is None, "room 100 is known to be too small"
    window.taken(100)
    pull = window.request(3.0)
    assert pull is not None and pull.max_bytes == 200


def test_a_message_larger_than_the_window_is_reported_once_and_retried_slowly() -> None:
    window = _window(max_bytes=100)
    sent = 0
    reports = 0
    now = 0.0
    while now < 3.0:  # a client looping as fast as it can for 3 s
        if window.request(now) is not None:
            sent += 1
            reports += window.ended(1_000_000, 100, now, too_large=True)
        now += 0.001
    assert reports == 1
    assert sent <= 8, f"{sent} pulls in 3 s (was 8104)"
    window.delivered(90)  # the message went away; another arrived: progress resets the backoff
    window.taken(90)
    assert window.request(now) is not None


def test_a_consumer_batch_limit_shrinks_the_window_and_gives_the_pull_back() -> None:
    window = _window(max_messages=500)
    assert window.request(0.0) is not None
    window.refused(Limit.BATCH, 3, 0.0)
    assert window.pending_msgs == 0
    assert window.request(0.0) is None, "rate-limited right after a refusal"
    pull = window.request(1.0)
    assert pull is not None and pull.batch == 3
    assert window.request(1.0) is None, "one window of 3, not 166 pulls of 3"


def test_consumer_expires_and_bytes_limits_shape_the_pull() -> None:
    window = _window(max_bytes=10_000, expires=30)
    assert window.request(0.0) is not None
    window.refused(Limit.EXPIRES, 2.0, 0.0)
    pull = window.request(1.0)
    assert pull is not None and (pull.expires, pull.heartbeat) == (2.0, 1.0)
    window.reset()
    window.refused(Limit.MAX_BYTES, 1000, 1.0)
    pull = window.request(5.0)
    assert pull is not None and pull.max_bytes == 1000


def test_max_waiting_gives_back_the_newest_pull() -> None:
    window = _window(max_messages=10, threshold_messages=9)
    assert window.request(0.0) is not None
    window.delivered(0)
    window.taken(0)
    assert window.request(0.0) is not None  # a second pull of 1
    window.refused(Limit.WAITING, None, 0.0)
    assert window.pending_msgs == 9


def test_parse_exceeded() -> None:
    assert parse_exceeded("Exceeded MaxRequestBatch of 3") == (Limit.BATCH, 3)
    assert parse_exceeded("Exceeded MaxRequestExpires of 2s") == (Limit.EXPIRES, 2.0)
    assert parse_exceeded("Exceeded MaxRequestExpires of 1m30s") == (Limit.EXPIRES, 90.0)
    assert parse_exceeded("Exceeded MaxRequestMaxBytes of 1000") == (Limit.MAX_BYTES, 1000)
    assert parse_exceeded("Exceeded MaxWaiting") == (Limit.WAITING, None)


@pytest.mark.parametrize(
    "options",
    [
        {"threshold_messages": -1},
        {"max_messages": 10, "threshold_messages": 11},
        {"max_bytes": 100, "threshold_bytes": 101},
        {"max_bytes": 100, "threshold_bytes": -1},
        {"max_bytes": 100, "threshold_messages": 5},
        {"threshold_bytes": 5},
        {"max_bytes": 0},
        {"max_bytes": -1},
        {"max_messages": 0},
        {"max_messages": True},
        {"max_messages": 10, "max_bytes": 100},
        {"heartbeat": 31, "expires": 120},
        {"heartbeat": 0.1},
        {"heartbeat": 10, "expires": 15},
        {"expires": 0.5},
    ],
)
def test_bad_consume_options_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(ClientValidationError):
        pull_options(**options)  # type: ignore[arg-type]


def test_consume_defaults() -> None:
    options = pull_options()
    assert (options.max_messages, options.threshold_messages) == (500, 250)
    assert (options.expires, options.heartbeat) == (30.0, 15.0)
    assert pull_options(expires=120).heartbeat == 30.0, "capped at 30 s"
    assert pull_options(max_bytes=1000).threshold_bytes == 500


@pytest.mark.parametrize(
    "options",
    [
        {"max_bytes": 0},
        {"max_bytes": -1},
        {"max_messages": 0},
        {"max_messages": 1, "max_bytes": 10},
        {"expires": 0},
        {"heartbeat": 31, "expires": 100},
        {"heartbeat": 3, "expires": 5},
    ],
)
def test_bad_fetch_options_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(ClientValidationError):
        fetch_options(**options)  # type: ignore[arg-type]


def test_long_fetches_get_heartbeats_by_default() -> None:
    assert fetch_options(expires=30).heartbeat == 0
    assert fetch_options(expires=60).heartbeat == 5.0
    assert fetch_options(expires=10, heartbeat=2).heartbeat == 2.0


def test_a_pull_that_delivered_before_a_too_large_message_is_re_sent_without_delay() -> None:
    # The usual end of a byte-bounded pull in a stream of mixed sizes: no reason to wait.
    window = _window(max_bytes=1000)
    assert window.request(0.0) is not None
    for _ in range(4):
        window.delivered(200)
    assert window.ended(1_000_000, 200, 0.0, too_large=True) is False
    for _ in range(4):
        window.taken(200)
    pull = window.request(0.0)
    assert pull is not None and pull.max_bytes == 1000


def _fitted(max_messages: int, memory_bytes: int) -> PullWindow:
    options = sized_options(
        max_messages=max_messages,
        memory_bytes=memory_bytes,
        largest_message=1 << 20,
        expires=30,
        heartbeat=5,
    )
    return PullWindow(options)


def _deliver_and_take(window: PullWindow, count: int, size: int) -> None:
    for _ in range(count):
        window.delivered(size)
    for _ in range(count):
        window.taken(size)


def test_a_window_fitted_to_sizes_grows_to_its_limit_for_small_messages() -> None:
    window = _fitted(10_000, 8 << 20)
    first = window.request(0.0)  # sizes unknown: 8 of the largest messages (1 MiB)
    assert first is not None and (first.batch, first.max_bytes) == (8, 0)
    _deliver_and_take(window, 4, 250)
    pull = window.request(0.0)
    assert pull is not None and (pull.batch, pull.max_bytes) == (10_000 - 4, 0)  # 4 pending


def test_a_window_fitted_to_sizes_holds_few_large_messages() -> None:
    window = _fitted(10_000, 8 << 20)
    assert window.request(0.0) is not None
    _deliver_and_take(window, 8, 1 << 20)  # 1 MiB each: room for 8
    pull = window.request(0.0)
    assert pull is not None and (pull.batch, pull.max_bytes) == (8, 0)
    window.delivered(1 << 20)  # the limit stays fitted: 8 outstanding, 4 to go before a pull
    assert window.taken(1 << 20) is False
    for _ in range(3):
        window.delivered(1 << 20)
        window.taken(1 << 20)
    assert window.request(0.0) is not None, "half of the 8 taken: the next pull"


def test_a_window_not_fitted_to_sizes_keeps_its_count() -> None:
    window = _fitted(500, 0)
    pull = window.request(0.0)
    assert pull is not None and pull.batch == 500
    _deliver_and_take(window, 250, 1 << 20)
    pull = window.request(0.0)
    assert pull is not None and pull.batch == 250
