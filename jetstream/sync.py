"""The blocking client: JetStream without ``async``, for scripts, notebooks, web views,
thread pools and Spark tasks.

::

    import jetstream.sync, kvstore.sync

    with jetstream.sync.connect(url) as js:
        bucket = kvstore.sync.open_bucket(js, "profiles")
        bucket.put("alice.name", b"Alice")

Every call has the async API's name, arguments, result and errors (``kvstore.sync``,
``objstore.sync`` and ``pcgroups.sync`` hold the twins of those packages). The handle runs
the async client on an event loop of its own, on a daemon thread: one handle may be shared
by any number of threads, and used from inside a running event loop (a notebook cell)
without a deadlock. Ctrl-C in a blocking call cancels the operation and raises
``KeyboardInterrupt``; leaving an iterator early (``break``, ``close()``, garbage) stops its
watch, listing or consume; ``close()`` ends the thread. After ``os.fork()`` a handle from the
parent raises :class:`~jetstream.UsedAfterForkError`: connect again in the child.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Iterator
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, TypeVar

from nats.aio.msg import Msg

from ._api.client import DEFAULT_RETRY_DEADLINE, Feature
from ._blocking.consume import Consumer, MessageStream, PullMessage
from ._blocking.portal import BlockingIterator, Portal, ReadAheadIterator
from ._connect import DEFAULT_CONNECT_TIMEOUT
from ._connect import connect as aio_connect
from ._consume.consumer import Consumer as AioConsumer
from ._context import JetStream as AioJetStream
from ._protocol.message import StoredMessage
from ._protocol.models import (
    AccountInfo,
    ConsumerConfig,
    ConsumerInfo,
    PubAck,
    StreamConfig,
    StreamInfo,
)
from ._protocol.subjects import DEFAULT_API_PREFIX
from ._transport.session import DEFAULT_TIMEOUT

__all__ = [
    "BlockingIterator",
    "Consumer",
    "JetStream",
    "MessageStream",
    "Portal",
    "PullMessage",
    "ReadAheadIterator",
    "connect",
]

T = TypeVar("T")


def connect(
    servers: str | list[str] = "nats://127.0.0.1:4222",
    *,
    api_prefix: str = DEFAULT_API_PREFIX,
    timeout: float = DEFAULT_TIMEOUT,
    retry_deadline: float = DEFAULT_RETRY_DEADLINE,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    connect_attempts: int = 1,
    **nats_options: Any,
) -> JetStream:
    """Blocking :func:`jetstream.connect`: the same options, a :class:`JetStream` handle
    whose calls block. Connection callbacks (``error_cb``, ``disconnected_cb``, ...) stay
    async functions; they run on the handle's loop thread.

    Raises:
        As :func:`jetstream.connect` (ClientValidationError, AuthenticationError,
        ConnectionFailedError); KeyboardInterrupt on Ctrl-C (nothing is left open).
    """
    portal = Portal()
    try:
        context = portal.call(
            aio_connect(
                servers,
                api_prefix=api_prefix,
                timeout=timeout,
                retry_deadline=retry_deadline,
                connect_timeout=connect_timeout,
                connect_attempts=connect_attempts,
                **nats_options,
            )
        )
    except BaseException:
        portal.close()
        raise
    return JetStream(context, portal)


class JetStream:
    """A connection's JetStream context whose calls block (:class:`jetstream.JetStream`).

    ``aio`` is the async context it drives and ``portal`` the loop thread it runs on: async
    code of your own can run there with ``js.portal.call(coroutine)``. Closing the handle
    closes the connection and ends the thread.
    """

    def __init__(self, context: AioJetStream, portal: Portal) -> None:
        self.aio = context
        self.portal = portal

    @property
    def timeout(self) -> float:
        """Seconds a request waits for its reply (as the async context)."""
        return self.aio.timeout

    def close(self) -> None:
        """Close the connection (flushing what was published) and end the loop's thread.
        Idempotent; never raises (in a forked child it only marks the handle closed)."""
        if not self.portal.closed and not self.aio.is_closed:
            with contextlib.suppress(Exception):  # a forked child, the portal closed meanwhile
                self.portal.call(self.aio.close())
        self.portal.close()

    def __enter__(self) -> JetStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<blocking {self.aio!r}>"

    def _consumer(self, consumer: Awaitable[AioConsumer]) -> Consumer:
        return Consumer(self.portal.call(consumer), self.portal)

    def account_info(self) -> AccountInfo:
        """Blocking :meth:`jetstream.JetStream.account_info` (same errors)."""
        return self.portal.call(self.aio.account_info())

    def add_stream(self, config: StreamConfig) -> StreamInfo:
        """Blocking :meth:`jetstream.JetStream.add_stream` (same errors)."""
        return self.portal.call(self.aio.add_stream(config))

    def api_level(self) -> int:
        """Blocking :meth:`jetstream.JetStream.api_level` (same errors)."""
        return self.portal.call(self.aio.api_level())

    def consumer(self, stream: str, name: str) -> Consumer:
        """Blocking :meth:`jetstream.JetStream.consumer` (same errors)."""
        return self._consumer(self.aio.consumer(stream, name))

    def consumer_info(self, stream: str, name: str) -> ConsumerInfo:
        """Blocking :meth:`jetstream.JetStream.consumer_info` (same errors)."""
        return self.portal.call(self.aio.consumer_info(stream, name))

    def consumer_names(self, stream: str) -> Iterator[str]:
        """Blocking :meth:`jetstream.JetStream.consumer_names` (same errors)."""
        return ReadAheadIterator(self.portal, self.aio.consumer_names(stream))

    def count_messages(self, stream: str, subject: str, *, from_seq: int = 1) -> int:
        """Blocking :meth:`jetstream.JetStream.count_messages` (same errors)."""
        return self.portal.call(self.aio.count_messages(stream, subject, from_seq=from_seq))

    def create_consumer(self, stream: str, config: ConsumerConfig) -> Consumer:
        """Blocking :meth:`jetstream.JetStream.create_consumer` (same errors)."""
        return self._consumer(self.aio.create_consumer(stream, config))

    def create_consumer_info(
        self,
        stream: str,
        config: ConsumerConfig,
        *,
        action: Literal["create", "update", ""] = "create",
    ) -> ConsumerInfo:
        """Blocking :meth:`jetstream.JetStream.create_consumer_info` (same errors)."""
        return self.portal.call(self.aio.create_consumer_info(stream, config, action=action))

    def create_or_update_consumer(self, stream: str, config: ConsumerConfig) -> Consumer:
        """Blocking :meth:`jetstream.JetStream.create_or_update_consumer` (same errors)."""
        return self._consumer(self.aio.create_or_update_consumer(stream, config))

    def delete_consumer(self, stream: str, name: str) -> None:
        """Blocking :meth:`jetstream.JetStream.delete_consumer` (same errors)."""
        return self.portal.call(self.aio.delete_consumer(stream, name))

    def delete_message(self, stream: str, seq: int, *, erase: bool = False) -> None:
        """Blocking :meth:`jetstream.JetStream.delete_message` (same errors)."""
        return self.portal.call(self.aio.delete_message(stream, seq, erase=erase))

    def delete_stream(self, name: str) -> None:
        """Blocking :meth:`jetstream.JetStream.delete_stream` (same errors)."""
        return self.portal.call(self.aio.delete_stream(name))

    def get_last_message(
        self, stream: str, subject: str, *, direct: bool | None = True
    ) -> StoredMessage:
        """Blocking :meth:`jetstream.JetStream.get_last_message` (same errors)."""
        return self.portal.call(self.aio.get_last_message(stream, subject, direct=direct))

    def get_last_messages(
        self, stream: str, subjects: list[str], *, up_to_seq: int | None = None
    ) -> tuple[list[StoredMessage], int | None]:
        """Blocking :meth:`jetstream.JetStream.get_last_messages` (same errors)."""
        return self.portal.call(self.aio.get_last_messages(stream, subjects, up_to_seq=up_to_seq))

    def get_message(self, stream: str, seq: int, *, direct: bool | None = True) -> StoredMessage:
        """Blocking :meth:`jetstream.JetStream.get_message` (same errors)."""
        return self.portal.call(self.aio.get_message(stream, seq, direct=direct))

    def get_next_message(
        self, stream: str, subject: str, seq: int, *, direct: bool | None = True
    ) -> StoredMessage:
        """Blocking :meth:`jetstream.JetStream.get_next_message` (same errors)."""
        return self.portal.call(self.aio.get_next_message(stream, subject, seq, direct=direct))

    @property
    def is_closed(self) -> bool:
        """As :attr:`jetstream.JetStream.is_closed`."""
        return self.aio.is_closed

    def pause_consumer(self, stream: str, consumer: str, until: datetime | None) -> bool:
        """Blocking :meth:`jetstream.JetStream.pause_consumer` (same errors)."""
        return self.portal.call(self.aio.pause_consumer(stream, consumer, until))

    def publish(
        self,
        subject: str,
        data: bytes,
        *,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        msg_id: str | None = None,
    ) -> PubAck:
        """Blocking :meth:`jetstream.JetStream.publish` (same errors)."""
        return self.portal.call(
            self.aio.publish(subject, data, headers=headers, timeout=timeout, msg_id=msg_id)
        )

    def purge_stream(
        self, name: str, *, subject: str | None = None, keep: int | None = None
    ) -> int:
        """Blocking :meth:`jetstream.JetStream.purge_stream` (same errors)."""
        return self.portal.call(self.aio.purge_stream(name, subject=subject, keep=keep))

    def request(
        self, subject: str, payload: bytes, response_type: type[T], *, idempotent: bool = False
    ) -> T:
        """Blocking :meth:`jetstream.JetStream.request` (same errors)."""
        return self.portal.call(
            self.aio.request(subject, payload, response_type, idempotent=idempotent)
        )

    def require(self, feature: Feature) -> None:
        """Blocking :meth:`jetstream.JetStream.require` (same errors)."""
        return self.portal.call(self.aio.require(feature))

    def send(
        self,
        subject: str,
        payload: bytes,
        *,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> Msg:
        """Blocking :meth:`jetstream.JetStream.send` (same errors)."""
        return self.portal.call(self.aio.send(subject, payload, headers=headers, timeout=timeout))

    def stream_for_subject(self, subject: str) -> str | None:
        """Blocking :meth:`jetstream.JetStream.stream_for_subject` (same errors)."""
        return self.portal.call(self.aio.stream_for_subject(subject))

    def stream_info(self, name: str) -> StreamInfo:
        """Blocking :meth:`jetstream.JetStream.stream_info` (same errors)."""
        return self.portal.call(self.aio.stream_info(name))

    def stream_missing(self, name: str) -> bool:
        """Blocking :meth:`jetstream.JetStream.stream_missing` (same errors)."""
        return self.portal.call(self.aio.stream_missing(name))

    def stream_names(self, *, subject: str | None = None) -> Iterator[str]:
        """Blocking :meth:`jetstream.JetStream.stream_names` (same errors)."""
        return ReadAheadIterator(self.portal, self.aio.stream_names(subject=subject))

    def supports(self, feature: Feature) -> bool:
        """Blocking :meth:`jetstream.JetStream.supports` (same errors)."""
        return self.portal.call(self.aio.supports(feature))

    def unpin_consumer(self, stream: str, consumer: str, group: str) -> None:
        """Blocking :meth:`jetstream.JetStream.unpin_consumer` (same errors)."""
        return self.portal.call(self.aio.unpin_consumer(stream, consumer, group))

    def update_consumer(self, stream: str, config: ConsumerConfig) -> Consumer:
        """Blocking :meth:`jetstream.JetStream.update_consumer` (same errors)."""
        return self._consumer(self.aio.update_consumer(stream, config))

    def update_stream(self, config: StreamConfig) -> StreamInfo:
        """Blocking :meth:`jetstream.JetStream.update_stream` (same errors)."""
        return self.portal.call(self.aio.update_stream(config))
