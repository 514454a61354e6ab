"""A direct path for deliveries to pull inboxes, past nats-py's per-message pipeline.

nats-py hands every ``MSG``/``HMSG`` frame its parser reads to ``Client._process_msg``, which
parses the header block in Python character by character, builds a ``Msg``, queues it for the
subscription's task, and that task awaits the subscription's callback: about two thirds of a
watch's time per event. :class:`DeliveryClient` is the nats-py client ``connect`` opens, with
that one method extended: frames for a subscription registered with :meth:`~DeliveryClient.route`
go straight to a synchronous handler with the raw header block; every other frame takes
nats-py's path unchanged. Subscribing, re-subscribing after a reconnect, unsubscribing and
draining stay nats-py's (the routed subscription is an ordinary one).

Contract with nats-py, checked by ``tests/unit/test_delivery_contract.py`` so that a nats-py
release that changes it fails loudly instead of silently bypassing the route:

* its protocol parser calls ``await client._process_msg(sid, subject, reply, payload, headers)``
  with ``sid`` an int, ``subject``/``reply`` bytes, ``payload`` bytes and ``headers`` the raw
  ``NATS/1.0...`` block or None;
* ``Subscription._id`` is the sid those frames carry;
* ``client.stats`` counts ``in_msgs`` and ``in_bytes``.

A context opened around a client of the caller's (not a :class:`DeliveryClient`) does not
route: its pulls take nats-py's path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

from nats.aio.client import Client

__all__ = ["DeliveryClient", "FrameHandler", "route_of"]

FrameHandler: TypeAlias = Callable[[bytes, bytes, "bytes | None", bytes], None]
"""``handler(subject, reply, header_block_or_None, payload)``; what it raises goes to the
client's error callback, as an exception in a subscription callback does."""


class DeliveryClient(Client):
    """nats-py's client, with frames for routed subscriptions handed over directly."""

    def __init__(self) -> None:
        super().__init__()
        self._routes: dict[int, FrameHandler] = {}

    def route(self, sub: Any, handler: FrameHandler) -> None:
        """Hand ``sub``'s frames to ``handler`` (on the reading task, in arrival order) instead
        of queueing them for its callback."""
        self._routes[sub._id] = handler

    def unroute(self, sub: Any) -> None:
        """Give ``sub``'s frames back to nats-py (frames for a subscription that is gone are
        dropped there)."""
        self._routes.pop(sub._id, None)

    async def _process_msg(
        self,
        sid: int,
        subject: bytes,
        reply: bytes,
        data: bytes,
        headers: bytes | None,
    ) -> None:
        handler = self._routes.get(sid)
        if handler is None:
            await super()._process_msg(sid, subject, reply, data, headers)  # type: ignore[arg-type]
            return
        stats = self.stats
        stats["in_msgs"] += 1
        stats["in_bytes"] += len(data)
        try:
            handler(subject, reply, headers, data)
        except Exception as exc:  # a bug there must not end nats-py's reading task
            await self._error_cb(exc)


def route_of(nc: Client) -> DeliveryClient | None:
    """``nc`` when it can route frames, else None (a client the caller opened)."""
    return nc if isinstance(nc, DeliveryClient) else None
