"""A listing is iterated with ``async for`` or awaited for a list (``await
kvstore.list_buckets(js)`` raised TypeError): lazily, once, what is left, its errors raised
from the await, and stopped by ``aclose``."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

import pytest

import jetstream


class _Source:
    """An async generator that records whether it started and was closed."""

    def __init__(self, items: list[int], error: Exception | None = None) -> None:
        self.items, self.error = items, error
        self.started = self.closed = False

    async def run(self) -> AsyncGenerator[int, None]:
        self.started = True
        try:
            for item in self.items:
                yield item
            if self.error is not None:
                raise self.error
        finally:
            self.closed = True


async def test_awaiting_a_listing_gives_a_list_and_iterating_it_gives_the_items() -> None:
    assert await jetstream.AsyncListing(_Source([1, 2, 3]).run()) == [1, 2, 3]
    iterated = jetstream.AsyncListing(_Source([1, 2, 3]).run())
    assert isinstance(iterated, AsyncIterator)
    assert [i async for i in iterated] == [1, 2, 3]


async def test_nothing_is_read_before_an_item_is_asked_for() -> None:
    source = _Source([1])
    listing = jetstream.AsyncListing(source.run())
    assert not source.started
    assert await listing == [1] and source.closed


async def test_awaiting_after_some_items_gives_the_rest_and_a_listing_is_read_once() -> None:
    listing = jetstream.AsyncListing(_Source([1, 2, 3]).run())
    assert await anext(listing) == 1
    assert await listing == [2, 3]
    assert await listing == [] and [i async for i in listing] == []


async def test_an_error_while_reading_raises_from_the_await() -> None:
    failing = jetstream.AsyncListing(_Source([1], jetstream.JetStreamError("gone")).run())
    with pytest.raises(jetstream.JetStreamError, match="gone"):
        await failing


async def test_aclose_stops_a_listing_left_early() -> None:
    source = _Source([1, 2, 3])
    listing = jetstream.AsyncListing(source.run())
    assert await anext(listing) == 1
    await listing.aclose()
    assert source.closed and [i async for i in listing] == []


async def test_the_contexts_listings_are_awaitable(js: jetstream.JetStream) -> None:
    await js.add_stream(jetstream.StreamConfig(name="LISTED", subjects=["listed.>"]))
    try:
        await js.create_consumer("LISTED", jetstream.ConsumerConfig(durable_name="reader"))
        assert "LISTED" in await js.stream_names()
        assert await js.stream_names(subject="listed.x") == ["LISTED"]
        assert await js.consumer_names("LISTED") == ["reader"]
    finally:
        await js.delete_stream("LISTED")
