"""The fenced-retry rules shared by JetStream.publish and AtomicBatch (pure logic)."""

from __future__ import annotations

import jetstream
from jetstream._publish.fence import Fence


async def _never() -> int | None:
    raise AssertionError("a lookup was made")


async def _found() -> int | None:
    return 7


async def test_a_refused_first_attempt_makes_no_lookup() -> None:
    fence = Fence("id")
    fence.attempt()
    assert not fence.retried
    assert await fence.settle(_never) is None


async def test_a_retry_after_a_definite_failure_makes_no_lookup() -> None:
    fence = Fence("id")
    fence.attempt()
    fence.failed(jetstream.NoRespondersError("503: nothing stored"))
    fence.attempt()
    assert fence.retried and not fence.in_doubt
    assert await fence.settle(_never) is None


async def test_an_ambiguous_failure_that_never_left_makes_no_lookup() -> None:
    fence = Fence("id")
    fence.attempt()
    fence.failed(jetstream.RequestTimeoutError("queued, never sent"), left=False)
    fence.attempt()
    assert await fence.settle(_never) is None


async def test_a_refused_retry_after_a_lost_ack_looks_the_write_up() -> None:
    fence = Fence("id")
    fence.attempt()
    fence.failed(jetstream.RequestTimeoutError("no ack"))
    fence.attempt()
    assert fence.in_doubt and fence.attempts == 2
    assert await fence.settle(_found) == 7
