"""AsyncResource: the one ``async with`` protocol of jetstore's resources."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["AsyncResource"]


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
