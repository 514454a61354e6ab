"""PullMessage: a message a consumer delivered, with its acknowledgements, and how a delivery
whose subject is not UTF-8 is recognised, skipped and reported."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Final

from nats.aio.client import Client
from nats.aio.msg import Msg

from .._api.client import ApiClient
from .._errors import (
    JetStreamError,
    UndecodableMessageError,
)
from .._protocol.message import AckReply, parse_ack_reply, parse_headers
from .._protocol.text import shown_bytes
from .._transport.nats_errors import nats_errors

if TYPE_CHECKING:
    from collections.abc import Callable


__all__ = [
    "PullMessage",
    "framed_message",
    "is_delivery",
    "lacks_headers",
    "no_delivery",
    "pull_message",
    "report_skipped",
    "skipped",
]

_log = logging.getLogger("jetstream")
_NS: Final = 1_000_000_000
_CONFIRM_TIMEOUT: Final = 5.0  # seconds to wait for the server to confirm an acknowledgement


class PullMessage:
    """A message delivered by a consumer, with its acknowledgement methods.

    ``undecodable`` marks a delivery whose subject (or reply subject) is not UTF-8 (see
    :mod:`jetstream._protocol.text`); its ``subject`` then holds the bytes as lone surrogates.
    Consumers skip such messages (:func:`skipped`); callers never receive one.

    ``headers`` may be None with the raw ``header_block`` given instead: the block is parsed
    on the first read of :attr:`headers` (a watch reads no header of most messages, see
    :func:`lacks_headers`).
    """

    __slots__ = (
        "_block",
        "_headers",
        "_meta",
        "_nc",
        "data",
        "refreshed_at",
        "reply",
        "size",
        "subject",
        "undecodable",
    )

    def __init__(
        self,
        subject: str,
        reply: str,
        data: bytes,
        headers: dict[str, str] | None,
        size: int,
        nc: Client,
        undecodable: bool = False,
        *,
        header_block: bytes | None = None,
    ) -> None:
        self.subject = subject
        self.data = data
        self._headers = headers  # not copied
        self._block = header_block
        self.reply = reply
        self.size = size
        self._nc = nc
        self._meta: AckReply | None = None
        self.undecodable = undecodable
        self.refreshed_at = 0.0
        """Event-loop time of its delivery to a consume, or of its last :meth:`in_progress`:
        its ``ack_wait`` runs from about then."""

    @property
    def headers(self) -> dict[str, str]:
        """The message's headers (an inline status as ``Status``/``Description``), as
        :func:`~jetstream._protocol.message.parse_headers` reads them."""
        headers = self._headers
        if headers is None:
            block = self._block
            self._headers = headers = parse_headers(block) if block else {}
        return headers

    @property
    def metadata(self) -> AckReply:
        """Stream and consumer sequences, delivery count, time and pending, from the reply."""
        if self._meta is None:
            self._meta = parse_ack_reply(self.reply)
        return self._meta

    async def ack(self, *, wait: bool = False) -> None:
        """Acknowledge (consumers with ``ack_policy`` explicit or all). With ``wait``, return
        only once the consumer has applied it (the server confirms, as nats.go's ``DoubleAck``):
        on a replicated consumer once a quorum of its servers has stored it, on one server
        once it is applied (a work-queue or interest stream has then removed the message from
        its store; the consumer's own state reaches the disk up to about 0.1 s later).

        Raises:
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
            RequestTimeoutError: ``wait`` and no confirmation within 5 s (the server does not
                answer an ack of a message beyond what it has recorded as delivered, as after
                a restart that lost the delivery).
        """
        await self._send(b"+ACK", wait, "ack")

    async def nak(self, delay: float | None = None, *, wait: bool = False) -> None:
        """Ask for redelivery, after ``delay`` seconds if given. With ``wait``, return only
        once the consumer has processed it (the server confirms; acknowledgements sent
        earlier on this connection are processed before it).

        Raises:
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
            RequestTimeoutError: ``wait`` and no confirmation within 5 s.
        """
        body = b"-NAK" if delay is None else b'-NAK {"delay":%d}' % int(delay * _NS)
        await self._send(body, wait, "nak")

    async def in_progress(self, *, wait: bool = False) -> None:
        """Reset the ack timer: still working on it. With ``wait``, return only once the
        consumer has processed it: the server answers a ``+WPI`` even for a message already
        acknowledged, after every acknowledgement sent earlier on this connection, so this
        is also a barrier ("my acks have been applied").

        Raises:
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
            RequestTimeoutError: ``wait`` and no confirmation within 5 s.
        """
        self.refreshed_at = asyncio.get_running_loop().time()
        await self._send(b"+WPI", wait, "in-progress")

    async def term(self, *, wait: bool = False) -> None:
        """Never redeliver. ``wait`` as for :meth:`ack`.

        Raises:
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
            RequestTimeoutError: ``wait`` and no confirmation within 5 s.
        """
        await self._send(b"+TERM", wait, "term")

    async def _send(self, body: bytes, wait: bool, what: str) -> None:
        """Send an acknowledgement; with ``wait`` as a request the server answers once it
        has processed it."""
        if not wait:
            with nats_errors(f"acknowledging {self.subject}"):
                await self._nc.publish(self.reply, body)
            return
        with nats_errors(f"{what} of {self.subject}"):
            await self._nc.request(self.reply, body, timeout=_CONFIRM_TIMEOUT)

    def __repr__(self) -> str:
        return f"<PullMessage {self.subject} {len(self.data)}B>"


def pull_message(msg: Msg, size: int) -> PullMessage:
    """The message nats-py delivered as a :class:`PullMessage` (its header dict, not copied)."""
    return PullMessage(msg.subject, msg.reply, msg.data, msg.headers or {}, size, msg._client)


def lacks_headers(message: PullMessage, names: tuple[bytes, ...]) -> bool:
    """Whether ``message`` certainly has none of the headers ``names`` (ASCII), told without
    parsing a block not parsed yet: a name absent from the block's bytes cannot be one of its
    headers (False may still mean none, e.g. a name inside a value). For the library's hot
    paths (a watch asks it of every event): ``names`` are not checked."""
    headers = message._headers
    if headers is not None:
        return not any(name.decode() in headers for name in names)
    block = message._block
    if block:
        for name in names:  # a loop, not any(): this runs for every event of a watch
            if name in block:
                return False
    return True


def framed_message(
    subject: bytes, reply: bytes, block: bytes | None, data: bytes, size: int, nc: Client
) -> PullMessage:
    """A routed frame as a :class:`PullMessage`, decoded by the one policy of
    :mod:`jetstream._protocol.text`: a subject or reply that is not UTF-8 makes it undecodable.
    Its header block is parsed when first read."""
    try:
        return PullMessage(
            subject.decode(), reply.decode(), data, None, size, nc, header_block=block
        )
    except UnicodeDecodeError:
        escaped = subject.decode("utf-8", "surrogateescape")
        back = reply.decode("utf-8", "surrogateescape")
        return PullMessage(
            escaped, back, data, None, size, nc, undecodable=True, header_block=block
        )


def skipped(message: PullMessage, stream: str) -> UndecodableMessageError:
    """The warning for an undecodable ``message`` of ``stream`` that a consumer skips."""
    try:
        seq = message.metadata.stream_seq
    except ValueError:
        seq = 0
    where = f"stream sequence {seq} of {stream}" if seq else stream
    return UndecodableMessageError(
        f"skipped the message at {where}: its subject {shown_bytes(message.subject)} is not UTF-8",
        stream=stream,
        seq=seq,
    )


def message_size(msg: Msg) -> int:
    """A message's size as the server counts it: subject + reply + headers + payload."""
    header_len = 0
    if msg.headers:
        header_len = 12 + sum(len(k) + len(v) + 4 for k, v in msg.headers.items())
    return len(msg.subject) + len(msg.reply) + header_len + len(msg.data)


async def terminate(message: PullMessage) -> None:
    """``+TERM`` an undecodable message, best effort (an ack-none consumer ignores it; a reply
    subject that is not UTF-8 cannot be published to)."""
    with contextlib.suppress(JetStreamError, UnicodeError):
        await message.term()


def is_delivery(message: PullMessage) -> bool:
    """Whether ``message`` came from the consumer: its reply is a JetStream ack subject."""
    return message.reply.startswith("$JS.ACK.")


def no_delivery(message: PullMessage, stream: str) -> UndecodableMessageError:
    """The warning for a message in a pull inbox whose reply is no JetStream ack subject:
    someone published it there; it is no delivery of the consumer and is dropped."""
    return UndecodableMessageError(
        f"dropped a message on {message.subject!r} in a pull inbox of {stream}: its reply "
        f"{message.reply[:80]!r} is no JetStream ack subject (someone published it there)",
        stream=stream,
    )


def report_skipped(
    js: ApiClient,
    message: PullMessage,
    stream: str,
    on_error: Callable[[JetStreamError], None] | None,
) -> None:
    """Count an undecodable ``message`` that a consumer skips and report it once: to
    ``on_error``, or as a warning of the ``jetstream`` logger."""
    js.skipped_messages += 1
    error = skipped(message, stream)
    if on_error is not None:
        on_error(error)
    else:
        _log.warning("%s", error)
