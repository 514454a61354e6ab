"""Blocking twins of the pull consumer, its message stream and its messages."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from .._consume import consumer as aio_consumer
from .._consume import message_stream as aio_stream
from .._consume import pull_message as aio_message
from .portal import BlockingIterator, Portal

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .._consume.message_stream import ErrorCallback
    from .._protocol.duration import DurationValue
    from .._protocol.message import AckReply
    from .._protocol.models import ConsumerInfo

__all__ = ["Consumer", "MessageStream", "PullMessage"]


class PullMessage:
    """A delivered message (:class:`jetstream.PullMessage`) whose acknowledgements block.
    ``subject``, ``data``, ``reply`` and ``size`` are the message's own."""

    __slots__ = ("aio", "data", "portal", "reply", "size", "subject")

    def __init__(self, message: aio_message.PullMessage, portal: Portal) -> None:
        self.aio = message
        self.portal = portal
        self.subject = message.subject
        self.data = message.data
        self.reply = message.reply
        self.size = message.size

    @property
    def headers(self) -> dict[str, str]:
        """As :attr:`jetstream.PullMessage.headers` (parsed when first read)."""
        return self.aio.headers

    @property
    def metadata(self) -> AckReply:
        """As :attr:`jetstream.PullMessage.metadata`."""
        return self.aio.metadata

    def ack(self, *, wait: bool = False) -> None:
        """Blocking :meth:`jetstream.PullMessage.ack` (same errors)."""
        self.portal.call(self.aio.ack(wait=wait))

    def nak(self, delay: float | None = None, *, wait: bool = False) -> None:
        """Blocking :meth:`jetstream.PullMessage.nak` (same errors)."""
        self.portal.call(self.aio.nak(delay, wait=wait))

    def in_progress(self, *, wait: bool = False) -> None:
        """Blocking :meth:`jetstream.PullMessage.in_progress` (same errors)."""
        self.portal.call(self.aio.in_progress(wait=wait))

    def term(self, *, wait: bool = False) -> None:
        """Blocking :meth:`jetstream.PullMessage.term` (same errors)."""
        self.portal.call(self.aio.term(wait=wait))

    def __repr__(self) -> str:
        return f"<blocking {self.aio!r}>"


class MessageStream:
    """Messages of a running :meth:`Consumer.consume`: an iterator and context manager
    (:class:`jetstream.MessageStream`); leaving the ``with`` block stops it."""

    def __init__(self, stream: aio_stream.MessageStream, portal: Portal) -> None:
        self.aio = stream
        self.portal = portal
        self._messages = BlockingIterator(
            portal, stream, stop=stream.stop, convert=lambda m: PullMessage(m, portal)
        )

    @property
    def error(self) -> BaseException | None:
        """The terminal error that ended the stream, if any."""
        return self.aio.error

    @property
    def skipped(self) -> int:
        """Messages skipped because their subject is not UTF-8 (see the async twin)."""
        return self.aio.skipped

    def __iter__(self) -> Iterator[PullMessage]:
        return self._messages

    def stop(self) -> None:
        """Blocking :meth:`jetstream.MessageStream.stop`."""
        self.portal.call(self.aio.stop())

    def drain(self) -> None:
        """Blocking :meth:`jetstream.MessageStream.drain`."""
        self.portal.call(self.aio.drain())

    def ending(self) -> None:
        """Blocking :meth:`jetstream.MessageStream.ending`."""
        self.portal.call(self.aio.ending())

    def closed(self) -> None:
        """Blocking :meth:`jetstream.MessageStream.closed`."""
        self.portal.call(self.aio.closed())

    def __enter__(self) -> MessageStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._messages.close()


class Consumer:
    """A pull consumer (:class:`jetstream.Consumer`) whose calls block."""

    def __init__(self, consumer: aio_consumer.Consumer, portal: Portal) -> None:
        self.aio = consumer
        self.portal = portal

    def consume(
        self,
        *,
        max_messages: int | None = None,
        max_bytes: int | None = None,
        expires: DurationValue | None = None,
        heartbeat: DurationValue | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
        error_callback: ErrorCallback | None = None,
        group: str | None = None,
        keep_buffered: bool = False,
    ) -> MessageStream:
        """Blocking :meth:`jetstream.Consumer.consume`, started: iterate the stream it returns
        (``with consumer.consume() as messages: for msg in messages: ...``). No message
        callback: iterate instead. ``error_callback`` (warnings) runs on the client's loop
        thread and must not block.

        Raises:
            As the async twin when the first pull is refused.
        """
        starting = self.aio.consume(
            max_messages=max_messages,
            max_bytes=max_bytes,
            expires=expires,
            heartbeat=heartbeat,
            threshold_messages=threshold_messages,
            threshold_bytes=threshold_bytes,
            error_callback=error_callback,
            group=group,
            keep_buffered=keep_buffered,
        )
        return MessageStream(self.portal.call(_started(starting)), self.portal)

    def fetch(
        self,
        max_messages: int | None = None,
        *,
        max_bytes: int | None = None,
        expires: DurationValue = 30.0,
        heartbeat: DurationValue | None = None,
        group: str | None = None,
    ) -> Iterator[PullMessage]:
        """Blocking :meth:`jetstream.Consumer.fetch` (same errors)."""
        fetched = self.aio.fetch(
            max_messages, max_bytes=max_bytes, expires=expires, heartbeat=heartbeat, group=group
        )
        return BlockingIterator(self.portal, fetched, convert=self._message)

    def next(
        self,
        timeout: DurationValue = 5.0,
        *,
        heartbeat: DurationValue | None = None,
        group: str | None = None,
    ) -> PullMessage:
        """Blocking :meth:`jetstream.Consumer.next` (same errors)."""
        return self._message(
            self.portal.call(self.aio.next(timeout, heartbeat=heartbeat, group=group))
        )

    def info(self) -> ConsumerInfo:
        """Blocking :meth:`jetstream.Consumer.info` (same errors)."""
        return self.portal.call(self.aio.info())

    def pin_id(self, group: str) -> str:
        """As :meth:`jetstream.Consumer.pin_id`."""
        return self.aio.pin_id(group)

    def _message(self, message: aio_message.PullMessage) -> PullMessage:
        return PullMessage(message, self.portal)


async def _started(starting: aio_stream.StartingStream) -> aio_stream.MessageStream:
    stream: aio_stream.MessageStream = await starting
    return stream
