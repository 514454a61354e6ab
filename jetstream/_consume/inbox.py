"""DeliveryInbox: the subscription a consumer's deliveries arrive on, routed past nats-py's
pipeline when the client allows it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from nats.aio.msg import Msg

from .._api.client import ApiClient
from .._transport.connection import reader_gone
from .._transport.delivery import discard, route_of
from .._transport.nats_errors import nats_errors
from .pull_message import PullMessage, framed_message, message_size, pull_message

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._transport.delivery import DeliveryClient

__all__ = ["DeliveryInbox"]


class DeliveryInbox:
    """A subscription on a new inbox whose deliveries reach ``receive`` as :class:`PullMessage` s,
    decoded by the one policy of :mod:`jetstream._protocol.text`: routed past nats-py's
    pipeline when the client can (see :mod:`jetstream._transport.delivery`), else through
    nats-py's. ``sized``: each message carries its size as the server counts it (bytes-mode
    pulls)."""

    def __init__(
        self, js: ApiClient, receive: Callable[[PullMessage], None], *, sized: bool
    ) -> None:
        self._js = js
        self._nc = js.nc
        self._receive = receive
        self._sized = sized
        self._sub: Any = None
        self._router: DeliveryClient | None = None
        self.subject = ""

    async def open(self, what: str) -> str:
        """Subscribe; returns the inbox subject.

        Raises:
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
        """
        nc = self._js.nc
        inbox = nc.new_inbox()
        with nats_errors(what):
            self._sub = await nc.subscribe(inbox, cb=self._on_msg)
        self._router = route_of(nc)
        if self._router is not None:
            self._router.route(self._sub, self._on_frame)
        self.subject = inbox
        return inbox

    async def close(self) -> None:
        """Unsubscribe (never raises); what arrives afterwards is dropped. The server is told
        within the request timeout (a frozen one must not hold a stop up); the subscription
        is gone from the client whatever happened to it before."""
        sub, self._sub = self._sub, None
        if sub is not None:
            self._unroute(sub)
            if not reader_gone(self._js.nc):  # else the loop is ending: tell nobody
                with contextlib.suppress(Exception):  # closed, reconnecting, drained: gone
                    async with asyncio.timeout(self._js.timeout):
                        await sub.unsubscribe()
            await discard(sub)  # a drain cut short left it registered

    async def drain(self) -> None:
        """Unsubscribe after what the server already sent has arrived (one round trip, at most
        the request timeout; never raises)."""
        sub = self._sub
        if sub is not None:
            with contextlib.suppress(Exception):  # closed, reconnecting, too slow: end anyway
                await asyncio.wait_for(sub.drain(), self._js.timeout)
            self._unroute(sub)

    def _unroute(self, sub: Any) -> None:
        if self._router is not None:
            self._router.unroute(sub)

    def _on_frame(self, subject: bytes, reply: bytes, block: bytes | None, data: bytes) -> None:
        """A delivery routed past nats-py's pipeline."""
        size = 0  # only bytes mode counts sizes: as the server does, the whole frame
        if self._sized:
            size = len(subject) + len(reply) + len(block or b"") + len(data)
        try:  # framed_message's common case inline: this runs for every delivery
            message = PullMessage(
                subject.decode(), reply.decode(), data, None, size, self._nc, header_block=block
            )
        except UnicodeDecodeError:
            message = framed_message(subject, reply, block, data, size, self._nc)
        self._receive(message)

    async def _on_msg(self, msg: Msg) -> None:
        """A delivery through nats-py's pipeline (a client the caller opened)."""
        self._receive(pull_message(msg, message_size(msg) if self._sized else 0))
