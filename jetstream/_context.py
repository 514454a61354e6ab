"""JetStream: the context the upper layers use, a facade over the API client it extends.

Each concern lives in its own module and takes the :class:`~jetstream._api.client.ApiClient`
this class is: the connection's lifecycle and request path
(:mod:`jetstream._transport.session`), JSON requests retried across elections and the
server's capabilities (:mod:`jetstream._api.client`), stream and consumer administration
(:mod:`jetstream._api.streams`, :mod:`jetstream._api.consumers`), stored-message reads
(:mod:`jetstream._api.direct_get`), publishing (:mod:`jetstream._publish.publish`) and pull
consumers (:mod:`jetstream._consume`). :func:`jetstream.connect` opens one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from ._api import consumers, direct_get, streams
from ._api.client import DEFAULT_RETRY_DEADLINE, ApiClient, Feature
from ._consume.consumer import Consumer
from ._listing import AsyncListing
from ._protocol.message import StoredMessage
from ._protocol.models import ConsumerConfig, ConsumerInfo, PubAck, StreamConfig, StreamInfo
from ._publish.publish import publish
from ._transport.session import DEFAULT_TIMEOUT

__all__ = ["DEFAULT_RETRY_DEADLINE", "DEFAULT_TIMEOUT", "Feature", "JetStream"]


class JetStream(ApiClient):
    """A JetStream context on a nats-py connection; an async context manager.

    Create it with :func:`connect` (it then owns and closes the connection) or wrap an existing
    nats-py client with ``JetStream(nc)`` (the caller keeps ownership). Once closed, every call
    through it (and through the buckets, stores and consumers made from it) raises
    :class:`ConnectionClosedError`; no nats-py exception reaches the caller.

    A context belongs to the event loop its connection runs in (the loop it was made in, or
    the first to use it when made outside any): a call from another loop, e.g. through
    a thread's own ``asyncio.run``, raises :class:`WrongEventLoopError` at once,
    as does every call through its buckets, stores and consumers (see :meth:`ensure_open`).
    """

    # -- streams ------------------------------------------------------------------------

    async def add_stream(self, config: StreamConfig) -> StreamInfo:
        """Create a stream. Creating an identical stream again is not an error.

        Raises:
            StreamExistsError: a stream of that name exists with another configuration.
            InvalidStreamConfigError: the server refused the configuration.
        """
        return await streams.add_stream(self, config)

    async def update_stream(self, config: StreamConfig) -> StreamInfo:
        """Replace a stream's configuration.

        Raises:
            StreamNotFoundError: no such stream.
            InvalidStreamConfigError: the server refused the change.
        """
        return await streams.update_stream(self, config)

    async def stream_info(self, name: str) -> StreamInfo:
        """Fetch a stream's configuration and state.

        Raises:
            StreamNotFoundError: no such stream.
        """
        return await streams.stream_info(self, name)

    async def delete_stream(self, name: str) -> None:
        """Delete a stream and all its messages.

        Raises:
            StreamNotFoundError: no such stream.
        """
        await streams.delete_stream(self, name)

    async def purge_stream(
        self, name: str, *, subject: str | None = None, keep: int | None = None
    ) -> int:
        """Remove messages from a stream, all or those of ``subject``, keeping the newest
        ``keep``. Returns how many were removed.

        Raises:
            StreamNotFoundError: no such stream.
        """
        return await streams.purge_stream(self, name, subject=subject, keep=keep)

    def stream_names(self, *, subject: str | None = None) -> AsyncListing[str]:
        """The names of all streams (or those listening on ``subject``): ``async for`` or
        ``await`` (a list).

        Raises:
            JetStreamError: (iterating) a page could not be fetched.
        """
        return AsyncListing(streams.stream_names(self, subject=subject))

    async def delete_message(self, stream: str, seq: int, *, erase: bool = False) -> None:
        """Delete one message by stream sequence (``erase`` overwrites it on disk).

        Raises:
            StreamNotFoundError: no such stream.
            JetStreamError: the message does not exist or the stream denies deletes.
        """
        await streams.delete_message(self, stream, seq, erase=erase)

    async def stream_for_subject(self, subject: str) -> str | None:
        """The name of the stream that stores ``subject`` (None if no stream does).

        Raises:
            JetStreamError: the lookup failed.
        """
        return await streams.stream_for_subject(self, subject)

    # -- consumers ----------------------------------------------------------------------

    async def create_consumer_info(
        self,
        stream: str,
        config: ConsumerConfig,
        *,
        action: Literal["create", "update", ""] = "create",
    ) -> ConsumerInfo:
        """Create (or with ``action`` update / create-or-update) a consumer; return its info.

        A config without ``name`` or ``durable_name`` gets a generated name (ephemeral). With
        exactly one ``filter_subject`` the filtered create subject is used, so permissions can be
        granted per filter.

        Raises:
            StreamNotFoundError: no such stream.
            ConsumerExistsError: ``create`` of an existing consumer with another configuration.
            ConsumerNotFoundError: ``update`` of a missing consumer.
            JetStreamError: the server refused the configuration.
        """
        return await consumers.create_consumer_info(self, stream, config, action=action)

    async def create_consumer(self, stream: str, config: ConsumerConfig) -> Consumer:
        """Create a consumer and return it (see :meth:`create_consumer_info`).

        Raises:
            StreamNotFoundError, ConsumerExistsError, JetStreamError: as
                :meth:`create_consumer_info`.
        """
        return Consumer(self, stream, await self.create_consumer_info(stream, config))

    async def update_consumer(self, stream: str, config: ConsumerConfig) -> Consumer:
        """Update an existing consumer.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        info = await self.create_consumer_info(stream, config, action="update")
        return Consumer(self, stream, info)

    async def create_or_update_consumer(self, stream: str, config: ConsumerConfig) -> Consumer:
        """Create a consumer, or update it if it exists.

        Raises:
            StreamNotFoundError: no such stream.
        """
        info = await self.create_consumer_info(stream, config, action="")
        return Consumer(self, stream, info)

    async def consumer(self, stream: str, name: str) -> Consumer:
        """Bind to an existing consumer.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        return Consumer(self, stream, await self.consumer_info(stream, name))

    async def consumer_info(self, stream: str, name: str) -> ConsumerInfo:
        """A consumer's configuration and state.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        return await consumers.consumer_info(self, stream, name)

    async def delete_consumer(self, stream: str, name: str) -> None:
        """Delete a consumer.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        await consumers.delete_consumer(self, stream, name)

    async def unpin_consumer(self, stream: str, consumer: str, group: str) -> None:
        """Release the pin of a ``pinned_client`` priority group: the pinned client's pulls
        get ``423`` (consume drops the pin and pulls again) and the next pull of any client is
        pinned. Nothing happens when nobody is pinned.

        Raises:
            ClientValidationError: ``group`` is not a priority group name (nothing is sent).
            InvalidNameError: a bad stream or consumer name (nothing is sent).
            ConsumerNotFoundError: no such consumer.
            PriorityGroupNotFoundError: the consumer has no priority group ``group``.
        """
        await consumers.unpin_consumer(self, stream, consumer, group)

    async def pause_consumer(self, stream: str, consumer: str, until: datetime | None) -> bool:
        """Hold a consumer's deliveries until ``until`` (an aware datetime, by the server's
        clock), or let them go on now (``None``); its pulls keep waiting meanwhile. Returns
        whether it is paused. nats-server 2.11+.

        Raises:
            ClientValidationError: ``until`` is not an aware datetime (nothing is sent).
            InvalidNameError: a bad stream or consumer name (nothing is sent).
            ConsumerNotFoundError: no such consumer.
        """
        return await consumers.pause_consumer(self, stream, consumer, until)

    def consumer_names(self, stream: str) -> AsyncListing[str]:
        """The names of a stream's consumers: ``async for`` or ``await`` (a list).

        Raises:
            StreamNotFoundError: (iterating) no such stream.
        """
        return AsyncListing(consumers.consumer_names(self, stream))

    # -- publish ------------------------------------------------------------------------

    async def publish(
        self,
        subject: str,
        data: bytes,
        *,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        msg_id: str | None = None,
    ) -> PubAck:
        """Publish to a stream and wait for its ack; 503s (no leader) are retried until
        ``retry_deadline``.

        With ``msg_id`` the write is idempotent, so an ack that timed out is retried too: the
        server answers a repeat with the original sequence (a duplicate ack), and when an
        expected-sequence header makes the repeat fail instead, the subject's messages are
        looked up by their ``Nats-Msg-Id`` to tell whether the earlier attempt was stored. Only
        a refused *retry* after an unanswered attempt pays for that lookup (see
        :class:`jetstream._publish.fence.Fence`): a refused first attempt raises at once.

        Raises:
            JetStreamError: the registered error from the ack (e.g. WrongLastSequenceError).
            ValueTooLargeError: headers plus payload exceed the server's ``max_payload``;
                ClientValidationError: the subject does not fit the server's control line;
                InvalidHeaderError: an empty or malformed header name, CR/LF in a value
                (nothing is sent, the connection stays up).
            NoRespondersError: no stream listens on ``subject``.
            RequestTimeoutError: no ack within the timeout (or the deadline, with ``msg_id``).
            PermissionDeniedError: the account may not publish there.
            CommitUnknownError: a retry after a lost answer was refused and the account may
                not read the stream to learn whether the first attempt was stored.
        """
        return await publish(self, subject, data, headers=headers, timeout=timeout, msg_id=msg_id)

    # -- stored messages (direct get) ---------------------------------------------------

    async def get_last_message(
        self, stream: str, subject: str, *, direct: bool | None = True
    ) -> StoredMessage:
        """The last message stored on ``subject``: a direct get (any replica answers), or with
        ``direct=False`` the leader's ``STREAM.MSG.GET`` (for streams without ``allow_direct``);
        ``direct=None`` tries the first and falls back to the second.

        Raises:
            MessageNotFoundError: nothing stored on that subject.
            NoRespondersError: no such stream, or direct get is off.
            RequestTimeoutError: no answer before ``retry_deadline`` (a read is asked again
                after each ``timeout``).
        """
        return await direct_get.get_last_message(self, stream, subject, direct=direct)

    async def get_next_message(
        self, stream: str, subject: str, seq: int, *, direct: bool | None = True
    ) -> StoredMessage:
        """The first message on ``subject`` (wildcards allowed) at or after stream sequence
        ``seq`` (``direct`` as in :meth:`get_last_message`).

        Raises:
            ClientValidationError: ``seq`` is not a positive int, or ``subject`` is empty.
            MessageNotFoundError: none at or after ``seq``.
            NoRespondersError: no such stream, or direct get is off.
            RequestTimeoutError: as :meth:`get_last_message`.
        """
        return await direct_get.get_next_message(self, stream, subject, seq, direct=direct)

    async def get_message(
        self, stream: str, seq: int, *, direct: bool | None = True
    ) -> StoredMessage:
        """Get the message with stream sequence ``seq`` (``direct`` as in
        :meth:`get_last_message`).

        Raises:
            MessageNotFoundError: no message with that sequence.
            NoRespondersError: no such stream, or direct get is off.
            RequestTimeoutError: no answer before ``retry_deadline`` (a read is asked again
                after each ``timeout``).
        """
        return await direct_get.get_message(self, stream, seq, direct=direct)

    async def get_last_messages(
        self, stream: str, subjects: list[str], *, up_to_seq: int | None = None
    ) -> tuple[list[StoredMessage], int | None]:
        """One batched direct get (``multi_last``): the last message of each subject (wildcards
        allowed) as of stream sequence ``up_to_seq`` (the stream's last when None), in stream
        order. Returns the messages and the sequence they are consistent as of (None when
        nothing matched and ``up_to_seq`` was not given).

        The server answers at most 1024 messages per request (413 Too Many Results beyond).

        Raises:
            NoRespondersError: no such stream, or direct get is off.
            ServerError: the server refused the request (e.g. 413).
            PermissionDeniedError: the user may not send it (at once, not after the timeout).
            RequestTimeoutError: the answer did not complete before ``retry_deadline`` (a
                read: an answer that stops for ``timeout`` is asked for again, whole).
        """
        return await direct_get.get_last_messages(self, stream, subjects, up_to_seq=up_to_seq)

    async def count_messages(self, stream: str, subject: str, *, from_seq: int = 1) -> int:
        """How many messages ``stream`` holds on ``subject`` (wildcards allowed) at or after
        stream sequence ``from_seq``: the server counts them for a batched direct get of one
        message (its ``Nats-Num-Pending``), so one message travels, whatever the count.

        Raises:
            ClientValidationError: ``from_seq`` is not a positive int, or ``subject`` is empty.
            NoRespondersError: no such stream, or direct get is off.
            RequestTimeoutError: as :meth:`get_last_messages`.
        """
        return await direct_get.count_messages(self, stream, subject, from_seq=from_seq)
