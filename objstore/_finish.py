"""Work that must run to its end once begun, even when its caller is cancelled: a meta
record written and the chunks it released not yet purged would otherwise stay behind."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_to_end"]

_T = TypeVar("_T")

_RUNNING: set[asyncio.Future[Any]] = set()  # work outliving a cancelled caller (kept referenced)


async def run_to_end(work: Coroutine[object, object, _T]) -> _T:
    """Await ``work`` shielded: a cancelled caller sees the cancellation at once while ``work``
    finishes in the background (bounded by the connection's timeouts); its result or error
    then goes unobserved."""
    task = asyncio.ensure_future(work)
    _RUNNING.add(task)
    task.add_done_callback(_done)
    return await asyncio.shield(task)


def _done(task: asyncio.Future[Any]) -> None:
    _RUNNING.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: nobody may be waiting for it any more
