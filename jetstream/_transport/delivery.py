"""A direct path for deliveries to pull inboxes, past nats-py's per-message pipeline.

For every ``MSG``/``HMSG`` frame, nats-py matches regular expressions on its read buffer, then
``Client._process_msg`` parses the header block character by character, builds a ``Msg``,
queues it for the subscription's task, and that task awaits the subscription's callback: about
two thirds of a watch's time per event. :class:`DeliveryClient` is the nats-py client
``connect`` opens, with its protocol reader replaced by a
:class:`~jetstream._transport.frames.FrameParser`: frames for a subscription registered with
:meth:`~DeliveryClient.route` go straight to a synchronous handler with the raw header block;
every other frame, and every other operation, takes nats-py's path unchanged. Subscribing,
re-subscribing after a reconnect, unsubscribing and draining stay nats-py's (the routed
subscription is an ordinary one).

Contract with nats-py, checked by ``tests/jetstream/test_delivery_contract.py`` so that a nats-py
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
  message's header dict (replaced here by :func:`~jetstream._protocol.message.parse_headers`);
* ``Subscription._stop_processing()`` cancels its task ``_wait_for_msgs_task`` (None without
  a callback), ``client._remove_sub(sid)`` forgets it; both do nothing the second time (for
  :func:`discard`);
* ``_pongs`` holds a future per unanswered PING, oldest first, and ``_process_pong`` takes
  the oldest for each PONG (see :meth:`DeliveryClient._process_pong`).

A context opened around a client of the caller's (not a :class:`DeliveryClient`) does not
route: its pulls take nats-py's path.

One repair rides along: nats-py answers a ``PONG`` by setting the result of the oldest flush's
future, also when that flush gave up (timed out or cancelled: a drain cut short while the
server was frozen). ``set_result`` on a cancelled future raises on the reading task, which
ends; the connection then counts as connected while nothing is read any more. Here such a
future is skipped (it keeps its place, so later PONGs still answer their own flushes):
``_process_pong`` and ``_pongs`` are part of the contract above.
"""

from __future__ import annotations

import asyncio
from typing import Any

from nats.aio.client import Client

from .._protocol.message import parse_headers
from .frames import FrameHandler, FrameParser

__all__ = ["DeliveryClient", "FrameHandler", "discard", "route_of"]


class DeliveryClient(Client):
    """nats-py's client, reading with a :class:`FrameParser` that hands frames for routed
    subscriptions over directly."""

    def __init__(self) -> None:
        super().__init__()
        self._routes: dict[int, FrameHandler] = {}
        self._ps = FrameParser(self, self._routes)

    async def _process_headers(self, headers: bytes | None) -> dict[str, str] | None:
        """Header blocks of unrouted frames (request replies, direct gets) are parsed by the
        same parser as routed ones, under the one policy of :mod:`jetstream._protocol.text`."""
        return (parse_headers(headers) or None) if headers else None

    def route(self, sub: Any, handler: FrameHandler) -> None:
        """Hand ``sub``'s frames to ``handler`` (on the reading task, in arrival order) instead
        of queueing them for its callback."""
        self._routes[sub._id] = handler

    def unroute(self, sub: Any) -> None:
        """Give ``sub``'s frames back to nats-py (frames for a subscription that is gone are
        dropped there)."""
        self._routes.pop(sub._id, None)

    async def _process_pong(self) -> None:
        """A PONG answers the oldest PING. A flush that timed out or was cancelled (Ctrl-C
        while a context closes, a drain cut short by a frozen server) left its future there,
        cancelled: nats-py sets a result on it anyway, and the ``InvalidStateError`` ends its
        reading task, so the connection is dropped and re-established with a traceback
        logged. The late PONG only retires it."""
        pongs: list[Any] = self._pongs
        if pongs and pongs[0].done():
            pongs.pop(0)
            self._pongs_received += 1
            self._pings_outstanding = 0
            return
        await super()._process_pong()


async def discard(sub: Any) -> None:
    """Remove ``sub`` from its client here and now, whatever the server was told, and wait
    until its task has ended: a drain cut short leaves it registered, closed and refusing
    ``unsubscribe()``, its task waiting for messages for good (and nats-py's own unsubscribe
    cancels that task without waiting for it). Nothing more if nats-py removed it already."""
    sub._stop_processing()
    sub._conn._remove_sub(sub._id)
    task = sub._wait_for_msgs_task
    if task is not None and task is not asyncio.current_task():
        await asyncio.wait([task])


def route_of(nc: Client) -> DeliveryClient | None:
    """``nc`` when it can route frames, else None (a client the caller opened)."""
    return nc if isinstance(nc, DeliveryClient) else None
