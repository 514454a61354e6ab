"""Connection state changes (disconnected, reconnected, closed) told to whoever listens.

nats-py has one callback per change and per client; several consumers of one context need to
hear them, so :func:`jetstream.connect` wires nats-py's ``disconnected_cb``, ``reconnected_cb``
and ``closed_cb`` to this registry (calling the user's own callbacks after it). A context built
around an existing client (``JetStream(nc)``) is not wired: its callbacks belong to the caller,
and :attr:`ConnectionEvents.wired` stays False so listeners know to poll instead.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from .._errors import ClientValidationError

__all__ = ["ConnectionEvent", "ConnectionEvents", "Listener"]


class ConnectionEvent(enum.Enum):
    DISCONNECTED = "disconnected"
    RECONNECTED = "reconnected"
    CLOSED = "closed"


Listener = Callable[[ConnectionEvent], None]
"""Called (synchronously, so it must not block) with each change."""

Callback = Callable[[], Awaitable[None]]

_OPTIONS = {
    "disconnected_cb": ConnectionEvent.DISCONNECTED,
    "reconnected_cb": ConnectionEvent.RECONNECTED,
    "closed_cb": ConnectionEvent.CLOSED,
}


class ConnectionEvents:
    """Listeners of one context's connection changes."""

    def __init__(self) -> None:
        self._listeners: set[Listener] = set()
        self.wired = False
        """True once nats-py's callbacks reach :meth:`notify` (set by ``connect``)."""

    def add(self, listener: Listener) -> None:
        self._listeners.add(listener)

    def remove(self, listener: Listener) -> None:
        self._listeners.discard(listener)

    def notify(self, event: ConnectionEvent) -> None:
        for listener in list(self._listeners):  # a listener may remove itself
            listener(event)


def chain_callbacks(
    nats_options: dict[str, Any], targets: Callable[[], list[ConnectionEvents]]
) -> None:
    """Replace the connection callbacks in ``nats_options`` by ones that notify ``targets()``
    (the registries of the contexts on that client, none during the first connect) and then
    call the callback the user passed, if any.

    Raises:
        ClientValidationError: a callback the user passed is not a coroutine function (nats-py
            awaits them).
    """
    for option, event in _OPTIONS.items():
        user_cb = nats_options.get(option)
        if user_cb is not None and not inspect.iscoroutinefunction(user_cb):
            raise ClientValidationError(f"{option} must be an async function: {user_cb!r}")
        nats_options[option] = _chained(event, user_cb, targets)


def _chained(
    event: ConnectionEvent,
    user_cb: Callback | None,
    targets: Callable[[], list[ConnectionEvents]],
) -> Callback:
    async def callback() -> None:
        for events in targets():
            events.notify(event)
        if user_cb is not None:
            await user_cb()

    return callback
