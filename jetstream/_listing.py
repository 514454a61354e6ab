"""AsyncListing: what every listing of the library returns (bucket, store and group names,
keys, revisions, objects, stream and consumer names), read lazily with ``async for`` or
whole with ``await``, which is what nats-py's listings are."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Generator
from typing import Any, TypeVar

from ._resource import aclose_iterator

__all__ = ["AsyncListing"]

T = TypeVar("T")


class AsyncListing(AsyncIterator[T]):
    """A listing read from the server as it is iterated; also awaitable, for all of it as a list::

        async for name in kvstore.list_buckets(js): ...   # one at a time, as they arrive
        names = await kvstore.list_buckets(js)            # list[str]

    Nothing is sent before the first item is asked for. Awaiting collects what is left (all
    of it, unless some items were already taken); an error while reading raises from the
    ``await`` as it would from the loop, and stops the listing. A listing is read once:
    ended, it stays empty. ``aclose()`` stops it (as an async generator's:
    ``contextlib.aclosing`` works); one left early without it stops once it is garbage
    collected.
    """

    __slots__ = ("_items",)

    def __init__(self, items: AsyncIterator[T]) -> None:
        self._items = items

    def __aiter__(self) -> AsyncListing[T]:
        return self

    def __anext__(self) -> Awaitable[T]:
        return self._items.__anext__()  # no frame of our own per item

    def __await__(self) -> Generator[Any, None, list[T]]:
        return self._all().__await__()

    async def _all(self) -> list[T]:
        try:
            return [item async for item in self._items]
        except BaseException:
            # An iterator that can go on after an error (a KV history past a revision that
            # does not open) would hold its consumer until collected: awaited, it is done.
            with contextlib.suppress(Exception):  # the error to raise is the first one
                await self.aclose()
            raise

    async def aclose(self) -> None:
        """Stop the listing (a consumer it reads from is deleted)."""
        await aclose_iterator(self._items)
