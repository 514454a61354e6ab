"""Work that must run to its end once begun, even when its caller is cancelled: a meta
record written and the chunks it released not yet purged would otherwise stay behind."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeAlias, TypeVar

from ._errors import ObjectChangedError

__all__ = ["CallerGone", "run_attempts_to_end", "run_to_end", "stop_if_gone"]

_T = TypeVar("_T")

CallerGone: TypeAlias = Callable[[], bool]
"""True once the caller of :func:`run_attempts_to_end` has seen its cancellation."""

_RUNNING: set[asyncio.Future[Any]] = set()  # work outliving a cancelled caller (kept referenced)


async def run_to_end(work: Coroutine[object, object, _T]) -> _T:
    """Await ``work`` shielded: a cancelled caller sees the cancellation at once while ``work``
    finishes in the background (bounded by the connection's timeouts); its result or error
    then goes unobserved."""
    task = asyncio.ensure_future(work)
    _RUNNING.add(task)
    task.add_done_callback(_done)
    return await asyncio.shield(task)


async def run_attempts_to_end(make: Callable[[CallerGone], Coroutine[object, object, _T]]) -> _T:
    """:func:`run_to_end` for a retry loop: ``make(caller_gone)`` builds the work, which must
    start no new attempt once ``caller_gone()`` is true. A write already sent may still land,
    but a retry computed from a record read after the caller saw the cancellation could undo
    what the caller did next (a put or delete of the same name, found by the model tests)."""
    gone = False

    def caller_gone() -> bool:
        return gone

    try:
        return await run_to_end(make(caller_gone))
    except asyncio.CancelledError:
        gone = True
        raise


def stop_if_gone(attempt: int, caller_gone: CallerGone, what: str) -> None:
    """Call right before a retry's write, after its reads: once the caller saw its
    cancellation, a write computed from what is there now could undo the caller's next call.

    Raises:
        ObjectChangedError: a retry (``attempt`` > 0) after the caller has gone.
    """
    if attempt and caller_gone():
        raise ObjectChangedError(f"{what}: cancelled, and the record changed; nothing written")


def _done(task: asyncio.Future[Any]) -> None:
    _RUNNING.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: nobody may be waiting for it any more
