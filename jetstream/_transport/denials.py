"""Permission violations, turned from the server's asynchronous ``-ERR`` into a prompt error.

The server answers a forbidden publish or subscription with
``-ERR 'Permissions Violation for Publish to "<subject>"'`` on the connection, not on the
request, so a request would otherwise wait for its full timeout. The context hands every
connection error to :meth:`Denials.note`, which calls the watchers of that subject (and, for a
refused reply-inbox subscription, every watcher: no reply can ever arrive).

nats-py lowercases the whole message, subject included, so subjects are matched without case
(NATS subjects are case-sensitive: two in-flight subjects differing only in case would both
be failed).
"""

from __future__ import annotations

import re
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable

from .._errors import PermissionDeniedError

__all__ = ["Denials"]

_VIOLATION = re.compile(
    r"permissions violation for (publish|subscription) to \"?([^\"']+)\"?", re.I
)


_REMEMBERED = 1024


Refused = Callable[[PermissionDeniedError], None]
"""Called with the refusal of a watched subject."""


class Denials:
    def __init__(self) -> None:
        self._watchers: dict[str, set[Refused]] = defaultdict(set)
        self._recent: OrderedDict[str, PermissionDeniedError] = OrderedDict()

    def recent(self, subjects: Iterable[str]) -> PermissionDeniedError | None:
        """The refusal of one of ``subjects`` seen lately (publishes sent without a reply, like
        the middle messages of a batch, can only be checked this way)."""
        for subject in subjects:
            error = self._recent.get(subject.lower())
            if error is not None:
                return error
        return None

    def pardon(self, subject: str) -> None:
        """Forget a refusal of ``subject`` (it is asked for again, e.g. after a reconnect)."""
        self._recent.pop(subject.lower(), None)

    def watch(self, subject: str, on_refused: Refused) -> None:
        """Call ``on_refused`` if the server refuses ``subject`` (until :meth:`forget`)."""
        self._watchers[subject.lower()].add(on_refused)

    def forget(self, subject: str, on_refused: Refused) -> None:
        key = subject.lower()
        watchers = self._watchers.get(key)
        if watchers is not None:
            watchers.discard(on_refused)
            if not watchers:
                del self._watchers[key]

    def note(self, error: BaseException) -> bool:
        """Tell the watchers a permission violation concerns; True if it was one."""
        match = _VIOLATION.search(str(error))
        if match is None:
            return False
        kind, subject = match.group(1).lower(), match.group(2).lower()
        if kind == "subscription":
            targets = [w for watchers in self._watchers.values() for w in watchers]
            why = f"not allowed to subscribe to {subject!r}, so no reply can arrive (inbox prefix?)"
        else:
            targets = list(self._watchers.get(subject, ()))
            why = f"not allowed to publish to {subject!r}"
        self._recent[subject] = PermissionDeniedError(why, subject=subject)
        while len(self._recent) > _REMEMBERED:
            self._recent.popitem(last=False)
        for on_refused in targets:
            on_refused(PermissionDeniedError(why, subject=subject))
        return True
