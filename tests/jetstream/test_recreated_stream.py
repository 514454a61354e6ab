"""How a recreated ordered consumer tells a stream deleted and created again under its name
from the one it read: the new stream's sequences start over, and its creation time differs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jetstream import StreamConfig, StreamInfo
from jetstream._consume.ordered import stream_replaced
from jetstream._protocol.models import StreamState

CREATED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _info(last_seq: int, created: datetime | None) -> StreamInfo:
    return StreamInfo(
        config=StreamConfig(name="KV_b"), state=StreamState(last_seq=last_seq), created=created
    )


@pytest.mark.parametrize(
    ("last_seq", "created", "known", "delivered", "replaced"),
    [
        (10, CREATED, CREATED, 10, False),  # the same stream, nothing new
        (500, CREATED, CREATED, 10, False),  # the same stream, grown
        (10, CREATED, None, 10, False),  # creation time unknown, sequences fit
        (9, CREATED, CREATED, 10, True),  # below what it delivered: another stream
        (9, CREATED, None, 10, True),  # ... whatever else is known
        (500, CREATED + timedelta(seconds=1), CREATED, 10, True),  # grown past, created later
        (500, CREATED - timedelta(hours=1), CREATED, 10, True),  # a clock set back: still other
        (0, CREATED, None, 0, False),  # nothing delivered, nothing known
        (500, None, CREATED, 10, False),  # a server that does not say
    ],
)
def test_a_stream_is_another_when_its_sequences_or_creation_time_say_so(
    last_seq: int, created: datetime | None, known: datetime | None, delivered: int, replaced: bool
) -> None:
    assert stream_replaced(_info(last_seq, created), delivered, created=known) is replaced


READ_SINCE = CREATED + timedelta(minutes=5)  # the first consumer's creation


@pytest.mark.parametrize(
    ("last_seq", "created", "delivered", "replaced"),
    [
        (10, CREATED, 10, False),  # created before the consumer: the stream it read
        (3, READ_SINCE + timedelta(microseconds=1), 1, True),  # created after: sequences fit
        (3, READ_SINCE + timedelta(seconds=1), 0, True),  # ... nothing delivered yet
        (3, READ_SINCE, 1, False),  # the same instant: not after
        (3, None, 1, False),  # a server that does not say: the sequences decide
        (0, None, 1, True),
    ],
)
def test_a_stream_created_after_the_first_consumer_is_another(
    last_seq: int, created: datetime | None, delivered: int, replaced: bool
) -> None:
    """Without a creation time asked for first, the first consumer's own creation time (by
    the same server's clock) bounds the stream's: one created after it was created again."""
    info = _info(last_seq, created)
    assert stream_replaced(info, delivered, read_since=READ_SINCE) is replaced
