"""Permission violations, turned from the server's asynchronous ``-ERR`` into a prompt error.

The server answers a forbidden publish or subscription with
``-ERR 'Permissions Violation for Publish to "<subject>"'`` on the connection, not on the
request, so a request would otherwise wait for its full timeout. The context hands every
connection error to :meth:`Denials.note`, which fails the waiters of that subject (and, for a
refused reply-inbox subscription, every waiter: no reply can ever arrive).

nats-py lowercases the whole message, subject included, so subjects are matched without case
(NATS subjects are case-sensitive: two in-flight subjects differing only in case would both
be failed).
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict, defaultdict
from collections.abc import Iterable

from ._errors import PermissionDeniedError

__all__ = ["Denials"]

_VIOLATION = re.compile(
    r"permissions violation for (publish|subscription) to \"?([^\"']+)\"?", re.I
)


_REMEMBERED = 1024


class Denials:
    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Future[None]]] = defaultdict(set)
        self._recent: OrderedDict[str, PermissionDeniedError] = OrderedDict()

    def recent(self, subjects: Iterable[str]) -> PermissionDeniedError | None:
        """The refusal of one of ``subjects`` seen lately (publishes sent without a reply, like
        the middle messages of a batch, can only be checked this way)."""
        for subject in subjects:
            error = self._recent.get(subject.lower())
            if error is not None:
                return error
        return None

    def waiter(self, subject: str) -> asyncio.Future[None]:
        """A future failed with :class:`PermissionDeniedError` if ``subject`` is refused."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters[subject.lower()].add(future)
        return future

    def forget(self, subject: str, future: asyncio.Future[None]) -> None:
        key = subject.lower()
        waiters = self._waiters.get(key)
        if waiters is not None:
            waiters.discard(future)
            if not waiters:
                del self._waiters[key]
        if not future.done():
            future.cancel()

    def note(self, error: BaseException) -> bool:
        """Fail the waiters a permission violation concerns; True if it was one."""
        match = _VIOLATION.search(str(error))
        if match is None:
            return False
        kind, subject = match.group(1).lower(), match.group(2).lower()
        if kind == "subscription":
            targets = [f for waiters in self._waiters.values() for f in waiters]
            why = f"not allowed to subscribe to {subject!r}, so no reply can arrive (inbox prefix?)"
        else:
            targets = list(self._waiters.get(subject, ()))
            why = f"not allowed to publish to {subject!r}"
        error = PermissionDeniedError(why, subject=subject)
        self._recent[subject] = error
        while len(self._recent) > _REMEMBERED:
            self._recent.popitem(last=False)
        for future in targets:
            if not future.done():
                future.set_exception(PermissionDeniedError(why, subject=subject))
        return True
