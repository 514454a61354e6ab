"""AsyncResource: the one ``async with`` protocol of jetstore's resources."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["AsyncResource", "BatchPublisherResource", "aclose_iterator"]


class AsyncResource:
    """``async with resource:`` runs :meth:`_enter` and gives the resource; leaving the block
    runs :meth:`_exit` with the exception that ended it (None on a normal exit)."""

    async def _enter(self) -> None:
        """What entering does before the block runs (nothing by default)."""

    async def _exit(self, error: BaseException | None) -> None:
        """What leaving the block does: close, stop, commit or abandon."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self._enter()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._exit(exc)


class BatchPublisherResource(AsyncResource):
    """``async with`` for publishers of many messages (:class:`FastPublisher`,
    :class:`AckedPublisher`): leaving the block commits what was sent, or, on an error,
    abandons it (which waits until the server settled every message in flight)."""

    _closed: bool
    _sent: int

    async def commit(self) -> object:
        raise NotImplementedError

    async def abandon(self) -> None:
        raise NotImplementedError

    async def _close(self) -> None:
        raise NotImplementedError

    async def _exit(self, error: BaseException | None) -> None:
        if error is None and not self._closed and self._sent:
            await self.commit()
        elif error is not None:
            await self.abandon()
        await self._close()


async def aclose_iterator(iterator: object) -> None:
    """Close an async iterator that can be closed (an async generator, or an iterator with
    its own ``aclose``); others hold nothing to release."""
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        await aclose()
