"""Durations Go's ``time.Duration`` (int64 nanoseconds) cannot hold are refused with a typed
error naming the field, before anything is sent."""

from __future__ import annotations

from datetime import timedelta

import pytest

import jetstream
import kvstore


@pytest.mark.parametrize("value", [1e20, 10**20, 1e300, 10**13, timedelta(days=999_999_999)])
def test_a_duration_beyond_go_s_range_is_a_typed_error(value: object) -> None:
    # Before: OverflowError from timedelta (1e20 s), or a value past int64 nanoseconds sent on.
    with pytest.raises(jetstream.ClientValidationError, match="ack_wait"):
        jetstream.ConsumerConfig(ack_wait=value)  # type: ignore[arg-type]
    with pytest.raises(jetstream.ClientValidationError, match="max_age"):
        kvstore.BucketConfig(max_age=value)  # type: ignore[arg-type]
