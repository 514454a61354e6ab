"""TTL parsing follows nats-server's parseMessageTTL, stricter only on fractions."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jetstream import NEVER, InvalidTTLError
from jetstream._protocol.ttl import format_ttl, parse_ttl, parse_ttl_header


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (1, 1),
        (3600, 3600),
        (60.0, 60),
        (timedelta(minutes=2), 120),
        ("1s", 1),
        ("5s", 5),
        ("1h", 3600),
        ("1m30s", 90),
        ("1h0m0s", 3600),
        ("1.5m", 90),
        ("1500ms", None),  # fraction: refused (see below)
        ("30", 30),
        ("30d", 30 * 86_400),  # days: ours, sent as seconds
        ("1d12h", 36 * 3600),
        ("999999999", 999999999),
        (" 5s", 5),
        ("never", NEVER),
        ("NEVER", NEVER),
    ],
)
def test_accepted_values(value: object, seconds: int | None) -> None:
    if seconds is None:
        with pytest.raises(InvalidTTLError, match="whole number of seconds"):
            parse_ttl(value)  # type: ignore[arg-type]
    else:
        assert parse_ttl(value) == seconds  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [0, -1, 0.5, 1.5, "0", "0s", "500ms", "-1", "-5s", "abc", "", "5 s", "1e3s", "1.5s", "5w",
     timedelta(0), timedelta(milliseconds=999), timedelta(seconds=1.5), True, None, [1],
     float("nan"), float("inf"), 10**12],
)  # fmt: skip
def test_rejected_values(value: object) -> None:
    with pytest.raises(InvalidTTLError):
        parse_ttl(value)  # type: ignore[arg-type]


def test_invalid_ttl_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="at least 1 second"):
        parse_ttl("500ms")


def test_format_uses_integer_seconds_or_never() -> None:
    assert format_ttl(parse_ttl("1h30m")) == "5400"
    assert format_ttl(parse_ttl("never")) == "never"


@pytest.mark.parametrize(
    ("header", "seconds"), [("1.5s", 1), ("1m0s", 60), ("10", 10), ("never", NEVER), ("2s", 2)]
)
def test_stored_headers_are_read_like_the_server(header: str, seconds: int) -> None:
    assert parse_ttl_header(header) == seconds


@given(st.integers(min_value=1, max_value=9_223_372_036))
def test_every_whole_second_round_trips(seconds: int) -> None:
    assert parse_ttl(format_ttl(seconds)) == seconds
    assert parse_ttl(timedelta(seconds=seconds)) == seconds


def test_a_floor_refuses_shorter_ttls_but_not_never() -> None:
    from jetstream._protocol.ttl import parse_ttl_at_least

    floor = timedelta(seconds=5)
    assert parse_ttl_at_least(5, floor, owner="bucket 'b'") == 5
    assert parse_ttl_at_least("never", floor, owner="bucket 'b'") == NEVER
    assert parse_ttl_at_least(1, None, owner="bucket 'b'") == 1
    with pytest.raises(InvalidTTLError, match=r"bucket 'b'.*marker_ttl"):
        parse_ttl_at_least("4s", floor, owner="bucket 'b'")
    with pytest.raises(InvalidTTLError):
        parse_ttl_at_least(0, None, owner="bucket 'b'")
