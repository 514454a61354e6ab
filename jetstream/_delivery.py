"""A direct path for deliveries to pull inboxes, past nats-py's per-message pipeline.

For every ``MSG``/``HMSG`` frame, nats-py matches regular expressions on its read buffer, then
``Client._process_msg`` parses the header block character by character, builds a ``Msg``,
queues it for the subscription's task, and that task awaits the subscription's callback: about
two thirds of a watch's time per event. :class:`DeliveryClient` is the nats-py client
``connect`` opens, with its protocol reader replaced by a
:class:`~jetstream._frames.FrameParser`: frames for a subscription registered with
:meth:`~DeliveryClient.route` go straight to a synchronous handler with the raw header block;
every other frame, and every other operation, takes nats-py's path unchanged. Subscribing,
re-subscribing after a reconnect, unsubscribing and draining stay nats-py's (the routed
subscription is an ordinary one).

Contract with nats-py, checked by ``tests/unit/test_delivery_contract.py`` so that a nats-py
release that changes it fails loudly instead of silently bypassing the route:

* the client keeps its protocol parser in ``_ps``; the reading task calls
  ``await client._ps.parse(data)`` with what the socket returned, and ``_ps.reset()`` when it
  reconnects;
* ``await client._process_msg(sid, subject, reply, payload, headers)`` takes an unrouted frame,
  with ``sid`` an int, ``subject``/``reply`` bytes, ``payload`` bytes and ``headers`` the raw
  ``NATS/1.0...`` block or None;
* ``Subscription._id`` is the sid those frames carry;
* ``client.stats`` counts ``in_msgs`` and ``in_bytes``;
* ``await client._process_headers(block)`` turns an unrouted frame's header block into the
  message's header dict (replaced here by :func:`~jetstream._message.parse_headers`).

A context opened around a client of the caller's (not a :class:`DeliveryClient`) does not
route: its pulls take nats-py's path.
"""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client

from ._frames import FrameHandler, FrameParser
from ._message import parse_headers

__all__ = ["DeliveryClient", "FrameHandler", "route_of"]


class DeliveryClient(Client):
    """nats-py's client, reading with a :class:`FrameParser` that hands frames for routed
    subscriptions over directly."""

    def __init__(self) -> None:
        super().__init__()
        self._routes: dict[int, FrameHandler] = {}
        self._ps = FrameParser(self, self._routes)

    async def _process_headers(self, headers: bytes | None) -> dict[str, str] | None:
        """Header blocks of unrouted frames (request replies, direct gets) are parsed by the
        same parser as routed ones, under the one policy of :mod:`jetstream._wire_text`."""
        return (parse_headers(headers) or None) if headers else None

    def route(self, sub: Any, handler: FrameHandler) -> None:
        """Hand ``sub``'s frames to ``handler`` (on the reading task, in arrival order) instead
        of queueing them for its callback."""
        self._routes[sub._id] = handler

    def unroute(self, sub: Any) -> None:
        """Give ``sub``'s frames back to nats-py (frames for a subscription that is gone are
        dropped there)."""
        self._routes.pop(sub._id, None)


def route_of(nc: Client) -> DeliveryClient | None:
    """``nc`` when it can route frames, else None (a client the caller opened)."""
    return nc if isinstance(nc, DeliveryClient) else None
