"""``kvstore._bucket._discard``: a read that a successful ``create`` no longer needs is ended
at once, not waited for (reads retry until the retry deadline: helper-39 measured a create
returning 10 s after its write had succeeded)."""

from __future__ import annotations

import asyncio
import gc

import pytest

from kvstore._bucket import _discard


async def test_a_pending_read_is_cancelled_and_has_ended_when_discard_returns() -> None:
    read = asyncio.ensure_future(asyncio.sleep(60))
    loop = asyncio.get_running_loop()
    started = loop.time()
    await _discard(read)
    assert read.cancelled() and loop.time() - started < 1.0


async def test_a_failed_read_is_retrieved_so_it_is_never_reported_as_lost() -> None:
    async def fails() -> None:
        raise RuntimeError("no answer")

    read = asyncio.ensure_future(fails())
    await asyncio.sleep(0)
    handler_calls: list[dict[str, object]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: handler_calls.append(context))
    try:
        await _discard(read)
        del read
        gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert handler_calls == []


async def test_discard_does_not_swallow_its_callers_cancellation() -> None:
    shield = asyncio.Event()

    async def slow_to_end() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            await shield.wait()  # takes a while to end after its cancel
            raise

    read = asyncio.ensure_future(slow_to_end())
    await asyncio.sleep(0)
    discarding = asyncio.ensure_future(_discard(read))
    await asyncio.sleep(0)
    discarding.cancel()
    with pytest.raises(asyncio.CancelledError):
        await discarding
    shield.set()
    with pytest.raises(asyncio.CancelledError):
        await read
