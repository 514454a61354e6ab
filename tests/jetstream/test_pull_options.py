"""ADR-37 consume options and message size accounting: pure logic."""

from __future__ import annotations

import pytest
from nats.aio.msg import Msg

import jetstream
from jetstream._consume.pull_message import message_size
from jetstream._consume.pull_options import BYTES_MODE_BATCH, pull_options


def test_defaults_follow_adr_37() -> None:
    options = pull_options()
    assert (options.max_messages, options.expires, options.heartbeat) == (500, 30.0, 15.0)
    assert options.threshold_messages == 250 and not options.bytes_mode


def test_bytes_mode_uses_a_large_batch_and_half_the_bytes_as_threshold() -> None:
    options = pull_options(max_bytes=1 << 20)
    assert options.bytes_mode and options.max_messages == BYTES_MODE_BATCH
    assert options.threshold_bytes == 1 << 19


def test_heartbeat_defaults_to_half_of_expires_within_bounds() -> None:
    assert pull_options(expires=1.0).heartbeat == 0.5
    assert pull_options(expires=120.0).heartbeat == 30.0
    assert pull_options(max_messages=1).threshold_messages == 0


@pytest.mark.parametrize(
    "options",
    [
        {"max_messages": 10, "max_bytes": 100},
        {"max_messages": 0},
        {"max_bytes": 0},
        {"expires": 0.5},
        {"expires": 10, "heartbeat": 6},
        {"expires": 10, "heartbeat": 0.1},
    ],
)
def test_conflicting_or_out_of_range_options_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(jetstream.ClientValidationError):
        pull_options(**options)  # type: ignore[arg-type]


def test_message_size_counts_subject_reply_headers_and_payload() -> None:
    msg = Msg(None, subject="a.b", reply="$JS.ACK.x", data=b"12345", headers={"K": "v"})  # type: ignore[arg-type]
    header_block = len(b"NATS/1.0\r\nK: v\r\n\r\n")
    assert message_size(msg) == 3 + 9 + header_block + 5
