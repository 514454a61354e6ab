"""A stored message's time as the server keeps it: nanoseconds, the same through every read
(direct get, the leader's get, a consumer's delivery), and a datetime made from them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest

from jetstream import JetStream, OrderedConsumer, StreamConfig
from jetstream._protocol.message import ns_of_time, time_of_ns, timestamp_ns


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("2026-11-22T01:56:26.344916173Z", 1795312586_344916173),
        ("2026-11-22T01:56:26Z", 1795312586_000000000),
        ("2026-11-22T01:56:26.5Z", 1795312586_500000000),
        ("2026-11-22T03:56:26.000000001+02:00", 1795312586_000000001),
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59.999999999Z", -1),
    ],
)
def test_server_timestamps_keep_every_nanosecond(text: str, ns: int) -> None:
    assert timestamp_ns(text) == ns
    assert time_of_ns(ns) == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=ns // 1000)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "2026-11-22",
        "2026-11-22T01:56:26",
        "2026-11-22T01:56:26.Z",
        "2026-11-22T01:56:26.\u0661Z",  # a digit, but not an ASCII one
        "yesterday",
    ],
)
def test_text_that_is_no_timestamp_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        timestamp_ns(text)


def test_aware_times_convert_to_nanoseconds_and_naive_ones_are_refused() -> None:
    when = datetime(2026, 11, 22, 3, 56, 26, 344916, tzinfo=timezone(timedelta(hours=2)))
    assert ns_of_time(when) == 1795312586_344916000
    assert time_of_ns(ns_of_time(when)) == when
    with pytest.raises(ValueError):
        ns_of_time(datetime(2026, 11, 22))


async def test_every_read_of_a_message_gives_the_same_nanoseconds(
    js: JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("T")
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_direct=True))
    try:
        for i in range(20):
            await js.publish(f"{name}.k", b"%d" % i)
        direct = [await js.get_message(name, seq, direct=True) for seq in range(1, 21)]
        leader = [await js.get_message(name, seq, direct=False) for seq in range(1, 21)]
        async with OrderedConsumer(js, name, until_caught_up=True) as consumer:
            delivered = [message.metadata async for message in consumer]
        times = [m.time_ns for m in direct]
        assert times == [m.time_ns for m in leader] == [m.time_ns for m in delivered]
        assert any(ns % 1000 for ns in times), "sub-microsecond digits were dropped"
        assert [m.time for m in direct] == [time_of_ns(ns) for ns in times]
        assert [m.time for m in delivered] == [m.time for m in leader]
    finally:
        await js.delete_stream(name)
