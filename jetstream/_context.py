"""The JetStream context: owns a nats-py connection and offers the API the upper layers use."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import datetime
from typing import Any, Literal, TypeVar

import msgspec
import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.nuid import NUID

from . import headers as hdr
from ._consume.consumer import Consumer
from ._consume.priority import validate_priority_group
from ._consume.scan import find_by_msg_id
from ._errors import (
    ClientValidationError,
    CommitUnknownError,
    ConnectionClosedError,
    ConnectionFailedError,
    JetStreamError,
    NoRespondersError,
    PermissionDeniedError,
    RequestTimeoutError,
    StreamNotFoundError,
    UnavailableError,
    UnsupportedServerFeatureError,
    WrongEventLoopError,
    WrongLastSequenceError,
)
from ._protocol import status as st
from ._protocol.duration import encode_hook
from ._protocol.limits import check_message_size, check_subject_length
from ._protocol.message import StoredMessage, parse_header_block, parse_headers
from ._protocol.models import (
    AccountInfo,
    ConsumerConfig,
    ConsumerInfo,
    ConsumerNamesResponse,
    ConsumerPauseResponse,
    MsgGetResponse,
    PubAck,
    PurgeResponse,
    StreamConfig,
    StreamInfo,
    StreamNamesResponse,
    SuccessResponse,
)
from ._protocol.text import encode_json
from ._publish.fence import Fence
from ._redact import redact_text
from ._resource import AsyncResource
from ._transport.connection import close_client, open_client, reader_gone
from ._transport.delivery import route_of
from ._transport.denials import Denials
from ._transport.events import ConnectionEvent, ConnectionEvents, chain_callbacks
from ._transport.nats_errors import nats_errors
from ._transport.requests import DEFAULT_API_PREFIX, ApiSubjects, decode_reply, request, send
from ._transport.servers import server_list

__all__ = ["DEFAULT_RETRY_DEADLINE", "DEFAULT_TIMEOUT", "Feature", "JetStream", "connect"]

DEFAULT_TIMEOUT = 5.0
"""Seconds to wait for an API reply or a publish ack (nats.go's default)."""

DEFAULT_CONNECT_TIMEOUT = 2.0
"""Seconds one attempt of the first connect may take (nats-py's default)."""

DEFAULT_RETRY_DEADLINE = 20.0
"""Seconds to keep retrying while a stream or JetStream has no leader (elections take 4-12 s
after a leader is killed)."""

T = TypeVar("T")
P = TypeVar("P", StreamNamesResponse, ConsumerNamesResponse)


async def _always() -> bool:
    return True


# Durations as nanoseconds; a lone surrogate in a name or description is a ClientValidationError.
_encode = functools.partial(encode_json, msgspec.json.Encoder(enc_hook=encode_hook).encode)
_log = logging.getLogger("jetstream")


class Feature(enum.Enum):
    """Server features the library uses, with the JetStream API level that brings them."""

    MESSAGE_TTL = ("per-message TTL", 1)
    ATOMIC_BATCH = ("atomic batch publish", 2)
    FAST_INGEST = ("fast-ingest batch publish", 4)
    BATCH_EOB = ("atomic batch commit by end-of-batch message", 4)  # server 2.14

    def __init__(self, label: str, api_level: int) -> None:
        self.label = label
        self.api_level = api_level


class JetStream(AsyncResource):
    """A JetStream context on a nats-py connection; an async context manager.

    Create it with :func:`connect` (it then owns and closes the connection) or wrap an existing
    nats-py client with ``JetStream(nc)`` (the caller keeps ownership). Once closed, every call
    through it (and through the buckets, stores and consumers made from it) raises
    :class:`ConnectionClosedError`; no nats-py exception reaches the caller.

    A context belongs to the event loop its connection runs in (the loop it was made in, or
    the first to use it when made outside any): a call from another loop, e.g. through
    :func:`jetstream.run_sync` from a notebook, raises :class:`WrongEventLoopError` at once,
    as does every call through its buckets, stores and consumers (see :meth:`ensure_open`).
    """

    def __init__(
        self,
        nc: Client,
        *,
        api_prefix: str = DEFAULT_API_PREFIX,
        timeout: float = DEFAULT_TIMEOUT,
        retry_deadline: float = DEFAULT_RETRY_DEADLINE,
        owns_connection: bool = False,
    ) -> None:
        self._nc = nc
        self._api = ApiSubjects(api_prefix)
        self.timeout = timeout
        self.retry_deadline = retry_deadline
        self.denials = Denials()
        """Turns the server's permission violations into prompt errors (see ``note_error``)."""
        self._owns_connection = owns_connection
        # The loop the connection reads and writes in (the first that uses the context when
        # it is made outside one): see ensure_open.
        self._loop = _running_loop()
        self._account_info: AccountInfo | None = None
        self._closed = False
        self._waiting: set[asyncio.Task[Any]] = set()  # tasks waiting in send() for a reply
        self._cut_off: set[asyncio.Task[Any]] = set()  # ... whose wait close() ended
        self._connection_events = ConnectionEvents()
        self._connection_events.add(self._on_connection_event)
        self.skipped_messages = 0
        """Messages this context's readers (watches, listings, consumers) skipped because
        their subject is not UTF-8; each was also reported once, naming its stream sequence."""

    @property
    def connection_events(self) -> ConnectionEvents:
        """Listeners of the connection's changes (disconnected, reconnected, closed). Only
        contexts made by :func:`connect` hear nats-py's callbacks (``wired``); every context
        tells its listeners when it is closed."""
        return self._connection_events

    @property
    def nc(self) -> Client:
        """The underlying nats-py client."""
        return self._nc

    @property
    def api(self) -> ApiSubjects:
        """The API subjects this context uses."""
        return self._api

    async def _exit(self, error: BaseException | None) -> None:
        await self.close()

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` was called (or the connection closed): every call then raises
        :class:`ConnectionClosedError`."""
        return self._closed or self._nc.is_closed

    def ensure_open(self) -> None:
        """Raise unless the context can still be used, from the running event loop. Every
        request, publish, pull and batch passes here first.

        Raises:
            ConnectionClosedError: :meth:`close` was called, or the connection is closed, or
                it reads nothing any more (its event loop, shutting down, cancelled its
                tasks): a request then fails at once instead of after its timeout.
            WrongEventLoopError: called from an event loop other than the context's own (its
                connection could never answer there: the call would wait out its timeout).
        """
        if self._closed or self._nc.is_closed:
            raise ConnectionClosedError("the JetStream context is closed")
        self.check_loop()
        if reader_gone(self._nc):
            raise ConnectionClosedError(
                "the connection reads nothing any more: its tasks were cancelled (the event "
                "loop is shutting down)"
            )

    def check_loop(self) -> None:
        """Raise unless called from the context's own event loop (or outside any loop): a
        wait there for the connection could never end, nor could a stop of its tasks.

        Raises:
            WrongEventLoopError: called from another event loop than the context's own.
        """
        loop = _running_loop()
        if loop is self._loop or loop is None:
            return
        if self._loop is None:
            self._loop = loop  # made outside any loop: the first one to use it owns it
            return
        raise WrongEventLoopError(
            "this JetStream context (and every bucket, store and consumer made from it) "
            "belongs to another event loop, the one it was connected in; connect inside the "
            "loop that uses it (with jetstream.run_sync: inside the coroutine it runs)"
        )

    async def close(self) -> None:
        """Close the context; close its connection too if it owns it (see :func:`connect`).

        Never raises and returns within about ``timeout`` seconds, whatever the connection is
        doing: a connected client is flushed (what was published reaches the server) and
        closed, one that is reconnecting, already closed or whose server died is closed at once
        (no reconnect happens afterwards). Messages received but not yet handed out are dropped
        (unacknowledged ones are redelivered); drain a connection you own first
        (``await js.nc.drain()``) to have its own subscriptions process theirs. Later calls
        raise :class:`ConnectionClosedError`, and so do calls still waiting for a reply once the
        connection is closed (at once, not after their timeout; what they sent may have been
        processed).
        """
        self._closed = True
        self._connection_events.notify(ConnectionEvent.CLOSED)  # consumers end now, not later
        if self._owns_connection:
            await close_client(self._nc, timeout=self.timeout)
            self._cut_off_waiting()

    def _on_connection_event(self, event: ConnectionEvent) -> None:
        """The client closed, by close() or by its owner (``nc.close()``/``drain()``, or
        reconnects given up): nats-py leaves request futures and our own answer routes
        waiting, so end those waits now rather than after their timeouts."""
        if event is ConnectionEvent.CLOSED and self._nc.is_closed:
            self._cut_off_waiting()
        elif event is ConnectionEvent.RECONNECTED:
            # The reply inbox was subscribed again: refused again, the server says so again.
            inbox = self._reply_inbox()
            if inbox is not None:
                self.denials.pardon(inbox)

    def _cut_off_waiting(self) -> None:
        # The flush got every reply the server had sent: the rest never will come.
        for task in self._waiting - self._cut_off:
            self._cut_off.add(task)
            task.cancel()

    def __repr__(self) -> str:
        url = self._nc.connected_url
        where = f"{url.hostname}:{url.port}" if url is not None else "not connected"
        return f"<JetStream {where} api={self._api.prefix!r}>"

    # -- the request path and failover --------------------------------------------------------

    def note_error(self, error: BaseException) -> None:
        """Give the context a connection error (``connect`` wires nats-py's ``error_cb`` here):
        a permission violation fails the matching in-flight requests at once."""
        self.denials.note(error)

    async def send(
        self,
        subject: str,
        payload: bytes,
        *,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> Msg:
        """Request/reply that fails fast with :class:`PermissionDeniedError` when the server
        refuses the subject (instead of waiting for the timeout).

        Raises:
            PermissionDeniedError, NoRespondersError, RequestTimeoutError.
            InvalidHeaderError: a header name or value that cannot be sent (nothing is sent).
            ClientValidationError: a subject longer than the server's control line leaves
                (nothing is sent: the server would close the connection for good).
            ConnectionClosedError: the context is closed, or closed while the call waited for
                its reply (the request may then have been processed).
            WrongEventLoopError: called from another event loop than the context's own.
            DisconnectedError: the connection is down and cannot buffer the request.
        """
        self.ensure_open()
        refused = self._reply_inbox_refused()
        if refused is not None:  # no reply can come: the server refused the reply inbox
            raise refused
        if headers:
            hdr.validate_headers(headers)  # nats-py would send an empty or broken name as is
        # Subjects may hold names from other clients' records (a link's target, a nuid).
        check_subject_length(self._nc, subject)
        with self._refusal_ends_wait(subject), self._ended_by_close(f"request on {subject}"):
            return await send(
                self._nc, subject, payload, timeout=timeout or self.timeout, headers=headers
            )

    @contextlib.contextmanager
    def _refusal_ends_wait(self, subject: str) -> Iterator[None]:
        """The current task waits for a reply to a request on ``subject`` in this block: when
        the server refuses the subject, the wait ends at once with PermissionDeniedError.

        No task per request (this is every put's path): a denial cancels the waiting task,
        and the cancellation is turned into the denial here."""
        task = asyncio.current_task()
        assert task is not None
        refusals: list[PermissionDeniedError] = []

        def refused(error: PermissionDeniedError) -> None:
            refusals.append(error)
            task.cancel()

        self.denials.watch(subject, refused)
        try:
            yield
        except asyncio.CancelledError:
            if not refusals:
                raise  # cancelled by someone else
            task.uncancel()
            raise refusals[0] from None
        finally:
            self.denials.forget(subject, refused)

    @contextlib.contextmanager
    def _ended_by_close(self, what: str) -> Iterator[None]:
        """The current task waits for the server in this block: once :meth:`close` has closed
        the connection (no reply can come any more) the wait ends with
        :class:`ConnectionClosedError` instead of running out its timeout.

        A cancel that arrives in the loop step that delivers the reply is kept: Python 3.11's
        ``asyncio.wait_for`` (nats-py's request and ``next_msg``) returns the reply and drops
        the cancel, and a watch cancelled while creating its consumer then waited forever."""
        task = asyncio.current_task()
        assert task is not None
        pending = task.cancelling()
        self._waiting.add(task)
        try:
            yield
            if task.cancelling() > pending:
                raise asyncio.CancelledError  # requested during the wait, dropped on the way
        except asyncio.CancelledError:
            if task in self._cut_off and task.uncancel() == pending:  # only close() did it
                raise ConnectionClosedError(
                    f"{what}: the connection closed while waiting for the reply (the request may "
                    "have been processed)"
                ) from None
            raise
        finally:
            self._waiting.discard(task)
            self._cut_off.discard(task)

    async def _request(
        self, subject: str, payload: bytes, response_type: type[T], *, idempotent: bool = False
    ) -> T:
        """A JSON API request, retried while JetStream has no leader (503); an idempotent one
        also after a timeout (asking again cannot change anything)."""
        return await self._failover(
            lambda: self._decoded(subject, payload, response_type),
            still_there=_always,
            retry_timeouts=idempotent,
            what=subject,
        )

    async def _decoded(self, subject: str, payload: bytes, response_type: type[T]) -> T:
        msg = await self.send(subject, payload)
        return decode_reply(msg.data, response_type, subject=subject)

    async def _failover(
        self,
        attempt: Callable[[], Awaitable[T]],
        *,
        still_there: Callable[[], Awaitable[bool]],
        retry_timeouts: bool = False,
        what: str = "",
    ) -> T:
        """Run ``attempt``; on a 503 (no responders) keep retrying with backoff until
        ``retry_deadline`` while ``still_there()`` says the target exists: a 503 then means a
        leader election, not a missing stream. JetStream's own "temporarily unavailable"
        answers (:class:`UnavailableError`) are retried the same way. Only these are retried
        for writes: nothing was stored, so a retry cannot apply a write twice.

        Each retry is logged at debug level; when retries run out, the error says how long it
        waited in all and what each attempt got (``what`` names the request)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + self.retry_deadline
        delay = 0.05
        tries = _Tries(what)
        while True:
            self.ensure_open()  # closed meanwhile (a caller's own connection stays open)
            try:
                return await attempt()
            except NoRespondersError as exc:
                tries.note(exc)
                if loop.time() >= deadline or not await self._probe(still_there):
                    tries.explain(exc, loop.time() - started)
                    raise
            except UnavailableError as exc:
                tries.note(exc)
                if loop.time() >= deadline:
                    tries.explain(exc, loop.time() - started)
                    raise
            except RequestTimeoutError as exc:
                tries.note(exc)
                if not retry_timeouts or loop.time() >= deadline:
                    tries.explain(exc, loop.time() - started)
                    raise
            pause = min(delay, max(0.0, deadline - loop.time()))
            _log.debug(
                "%s: attempt %d failed (%s), retrying in %.2fs", what, len(tries), tries.last, pause
            )
            await asyncio.sleep(pause)
            delay = min(delay * 2, 1.0)

    def _reply_inbox_refused(self) -> PermissionDeniedError | None:
        """The server's refusal of nats-py's shared reply-inbox subscription, if it refused it
        (a user connected without the inbox prefix its permissions allow). It is refused once,
        failing the first request at once; later requests would only time out."""
        inbox = self._reply_inbox()
        return None if inbox is None else self.denials.recent([inbox])

    def _reply_inbox(self) -> str | None:
        """The subject of nats-py's shared reply-inbox subscription (None before the first
        request subscribes it); tests/unit/test_request_contract.py checks its shape."""
        prefix = getattr(self._nc, "_resp_sub_prefix", None)
        return prefix.decode() + "*" if prefix else None

    async def _probe(self, still_there: Callable[[], Awaitable[bool]]) -> bool:
        try:
            return await still_there()
        except (NoRespondersError, RequestTimeoutError):
            return True  # the meta leader is being elected too: keep waiting
        except PermissionDeniedError:
            return True  # a least-privilege user may not look: wait for the deadline
        except JetStreamError:
            return False

    async def _serves_direct_get(self, stream: str) -> bool:
        """Whether a 503 from a direct get can be an election: the stream exists with
        ``allow_direct`` (otherwise nobody will ever answer)."""
        try:
            info = await request(
                self._nc, self._api.stream_info(stream), b"", StreamInfo, timeout=self.timeout
            )
        except StreamNotFoundError:
            return False
        return info.config.allow_direct

    async def stream_missing(self, name: str) -> bool:
        """Whether one stream info request (never retried) says stream ``name`` does not
        exist: how a 503 on a stream's subject is told apart from a leader election. False
        whenever the answer is not a definite "not found" (the stream exists, no reply, no
        responders while the meta leader is elected, no permission to look).

        Raises:
            ConnectionClosedError, WrongEventLoopError: as :meth:`ensure_open` (nothing else).
        """
        self.ensure_open()
        try:
            await self._decoded(self._api.stream_info(name), b"", StreamInfo)
        except StreamNotFoundError:
            return True
        except JetStreamError:
            return False
        return False

    async def _subject_has_stream(self, subject: str) -> bool:
        body = _encode({"offset": 0, "subject": subject})
        page = await request(
            self._nc, self._api.stream_names(), body, StreamNamesResponse, timeout=self.timeout
        )
        return bool(page.streams)

    # -- account and capabilities -------------------------------------------------------------

    async def account_info(self) -> AccountInfo:
        """Fetch account info, including the server's JetStream API level.

        Raises:
            JetStreamError: e.g. JetStream not enabled (10039/10076) or no responders.
        """
        info = await self._request(self._api.info(), b"", AccountInfo, idempotent=True)
        self._account_info = info
        return info

    async def api_level(self) -> int:
        """The server's JetStream API level, fetched once per context and cached.

        Raises:
            JetStreamError: as :meth:`account_info`.
        """
        if self._account_info is None:
            await self.account_info()
        assert self._account_info is not None
        return self._account_info.api.level

    async def supports(self, feature: Feature) -> bool:
        """Whether the server's API level provides ``feature``.

        Raises:
            JetStreamError: as :meth:`account_info`.
        """
        return await self.api_level() >= feature.api_level

    async def require(self, feature: Feature) -> None:
        """Raise unless the server provides ``feature``.

        Raises:
            UnsupportedServerFeatureError: the server's API level is too low; names the feature.
        """
        level = await self.api_level()
        if level < feature.api_level:
            raise UnsupportedServerFeatureError(
                feature=feature.label, required_level=feature.api_level, server_level=level
            )

    # -- streams ------------------------------------------------------------------------------

    async def add_stream(self, config: StreamConfig) -> StreamInfo:
        """Create a stream. Creating an identical stream again is not an error.

        Raises:
            StreamExistsError: a stream of that name exists with another configuration.
            InvalidStreamConfigError: the server refused the configuration.
        """
        subject = self._api.stream_create(config.name)
        return await self._request(subject, _encode(config), StreamInfo, idempotent=True)

    async def update_stream(self, config: StreamConfig) -> StreamInfo:
        """Replace a stream's configuration.

        Raises:
            StreamNotFoundError: no such stream.
            InvalidStreamConfigError: the server refused the change.
        """
        subject = self._api.stream_update(config.name)
        return await self._request(subject, _encode(config), StreamInfo, idempotent=True)

    async def stream_info(self, name: str) -> StreamInfo:
        """Fetch a stream's configuration and state.

        Raises:
            StreamNotFoundError: no such stream.
        """
        subject = self._api.stream_info(name)
        return await self._request(subject, b"", StreamInfo, idempotent=True)

    async def delete_stream(self, name: str) -> None:
        """Delete a stream and all its messages.

        Raises:
            StreamNotFoundError: no such stream.
        """
        subject = self._api.stream_delete(name)
        await self._request(subject, b"", SuccessResponse)

    async def purge_stream(
        self, name: str, *, subject: str | None = None, keep: int | None = None
    ) -> int:
        """Remove messages from a stream, all or those of ``subject``, keeping the newest
        ``keep``. Returns how many were removed.

        Raises:
            StreamNotFoundError: no such stream.
        """
        body: dict[str, Any] = {}
        if subject is not None:
            body["filter"] = subject
        if keep is not None:
            body["keep"] = keep
        payload = _encode(body) if body else b""
        subject = self._api.stream_purge(name)  # purging twice removes nothing more
        reply = await self._request(subject, payload, PurgeResponse, idempotent=True)
        return reply.purged

    async def stream_names(self, *, subject: str | None = None) -> AsyncIterator[str]:
        """Iterate over the names of all streams (or those listening on ``subject``).

        Raises:
            JetStreamError: a page could not be fetched.
        """
        query = {} if subject is None else {"subject": subject}
        async for page in self._pages(self._api.stream_names(), query, StreamNamesResponse):
            for name in page.streams or []:
                yield name

    async def delete_message(self, stream: str, seq: int, *, erase: bool = False) -> None:
        """Delete one message by stream sequence (``erase`` overwrites it on disk).

        Raises:
            StreamNotFoundError: no such stream.
            JetStreamError: the message does not exist or the stream denies deletes.
        """
        body = _encode({"seq": seq} if erase else {"seq": seq, "no_erase": True})
        subject = self._api.msg_delete(stream)
        await self._request(subject, body, SuccessResponse)

    # -- consumers ----------------------------------------------------------------------------

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
        name = config.name or config.durable_name
        if not name:
            name = NUID().next().decode()
            config = msgspec.structs.replace(config, name=name)
        filter_token = config.filter_subject if not config.filter_subjects else ""
        subject = self._api.consumer_create(stream, name, filter_token)
        body = _encode({"stream_name": stream, "config": config, "action": action})
        return await self._request(subject, body, ConsumerInfo, idempotent=True)

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
        subject = self._api.consumer_info(stream, name)
        return await self._request(subject, b"", ConsumerInfo, idempotent=True)

    async def delete_consumer(self, stream: str, name: str) -> None:
        """Delete a consumer.

        Raises:
            ConsumerNotFoundError: no such consumer.
        """
        subject = self._api.consumer_delete(stream, name)
        await self._request(subject, b"", SuccessResponse)

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
        subject = self._api.consumer_unpin(stream, consumer)
        body = _encode({"group": validate_priority_group(group)})
        await self._request(subject, body, SuccessResponse)

    async def pause_consumer(self, stream: str, consumer: str, until: datetime | None) -> bool:
        """Hold a consumer's deliveries until ``until`` (an aware datetime, by the server's
        clock), or let them go on now (``None``); its pulls keep waiting meanwhile. Returns
        whether it is paused. nats-server 2.11+.

        Raises:
            ClientValidationError: ``until`` is not an aware datetime (nothing is sent).
            InvalidNameError: a bad stream or consumer name (nothing is sent).
            ConsumerNotFoundError: no such consumer.
        """
        if until is not None and (not isinstance(until, datetime) or until.tzinfo is None):
            raise ClientValidationError(f"until must be an aware datetime or None, not {until!r}")
        subject = self._api.consumer_pause(stream, consumer)
        body = b"{}" if until is None else _encode({"pause_until": until})
        reply = await self._request(subject, body, ConsumerPauseResponse, idempotent=True)
        return reply.paused

    async def consumer_names(self, stream: str) -> AsyncIterator[str]:
        """Iterate over the names of a stream's consumers.

        Raises:
            StreamNotFoundError: no such stream.
        """
        subject = self._api.consumer_names(stream)
        async for page in self._pages(subject, {}, ConsumerNamesResponse):
            for name in page.consumers or []:
                yield name

    async def _pages(
        self, subject: str, query: dict[str, Any], page_type: type[P]
    ) -> AsyncIterator[P]:
        """The pages of a paged names listing, fetched one after another by offset."""
        offset = 0
        while True:
            body = _encode({"offset": offset, **query})
            page = await self._request(subject, body, page_type, idempotent=True)
            yield page
            offset += page.count
            if page.count == 0 or offset >= page.total:
                return

    # -- publish and direct get ---------------------------------------------------------------

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
        if msg_id is not None:
            headers = {**(headers or {}), hdr.MSG_ID: msg_id}
        if headers:
            hdr.validate_headers(headers)
        # The server would close the connection on either: refuse before anything is sent.
        check_subject_length(self._nc, subject)
        check_message_size(self._nc, subject, headers, len(data))
        fence = Fence(msg_id) if msg_id is not None else None

        async def attempt() -> PubAck:
            if fence is not None:
                fence.attempt()
            try:
                msg = await self.send(subject, data, timeout=timeout, headers=headers or None)
                return decode_reply(msg.data, PubAck, subject=subject)
            except JetStreamError as exc:
                if fence is not None:
                    fence.failed(exc)
                raise

        try:
            return await self._failover(
                attempt,
                still_there=lambda: self._subject_has_stream(subject),
                retry_timeouts=fence is not None,
                what=subject,
            )
        except WrongLastSequenceError:
            # A refused first attempt is definite; a refused retry may be our own echo.
            if fence is None:
                raise
            try:
                lookup = functools.partial(self._find_fenced, subject, fence.msg_id)
                stored = await fence.settle(lookup)
            except PermissionDeniedError as exc:
                raise CommitUnknownError(
                    f"{subject}: write outcome unknown (may not read the stream to learn it: "
                    f"{exc})",
                    msg_ids=[fence.msg_id],
                ) from exc
            if stored is None:
                raise
            return stored

    async def _find_fenced(self, subject: str, msg_id: str) -> PubAck | None:
        """The ack of an earlier attempt of ``msg_id`` on ``subject`` if it was stored."""
        stream = await self.stream_for_subject(subject)
        if stream is None:
            return None
        stored = await find_by_msg_id(self, stream, subject, msg_id)
        if stored is None:
            return None
        return PubAck(stream=stream, seq=stored.seq, duplicate=True)

    async def stream_for_subject(self, subject: str) -> str | None:
        """The name of the stream that stores ``subject`` (None if no stream does).

        Raises:
            JetStreamError: the lookup failed.
        """
        body = _encode({"offset": 0, "subject": subject})
        page = await self._request(
            self._api.stream_names(), body, StreamNamesResponse, idempotent=True
        )
        return next(iter(page.streams or []), None)

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
        return await self._get(stream, {"last_by_subj": subject}, direct, what=subject)

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
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
            raise ClientValidationError(f"seq must be a stream sequence >= 1: {seq!r}")
        if not isinstance(subject, str) or not subject:
            raise ClientValidationError(f"subject must be a non-empty string: {subject!r}")
        query = {"seq": seq, "next_by_subj": subject}
        return await self._get(stream, query, direct, what=f"{subject} from {seq}")

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
        return await self._get(stream, {"seq": seq}, direct, what=f"sequence {seq}")

    async def _get(
        self, stream: str, query: dict[str, Any], direct: bool | None, *, what: str
    ) -> StoredMessage:
        """One stored message: direct get (any replica; the last-by-subject form of the subject
        needs no JSON body), the leader's ``STREAM.MSG.GET`` (``direct=False``), or direct get
        falling back to the leader when nobody serves it (``direct=None``)."""
        if direct is None:
            try:
                return await self._get(stream, query, True, what=what)
            except NoRespondersError:
                return await self._get(stream, query, False, what=what)
        if not direct:
            return await self._msg_get(stream, query)
        subject = query.get("last_by_subj")
        get = self._api.direct_get(stream, subject)
        body = b"" if subject else _encode(query)
        msg = await self._failover(
            lambda: self.send(get, body),
            still_there=lambda: self._serves_direct_get(stream),
            retry_timeouts=True,  # a read: asking again is safe (a dead replica's lingering
            what=get,  # interest, or a paused server, times out one attempt, not the call)
        )
        return _stored_or_raise(msg.headers, msg.data, what=what)

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
        body: dict[str, Any] = {"multi_last": subjects}
        if up_to_seq is not None:
            body["up_to_seq"] = up_to_seq
        what = f"batched direct get on {stream}"
        answer = await self._batched_get(stream, body, up_to_seq, what)
        return answer.messages, answer.done.result()

    async def count_messages(self, stream: str, subject: str, *, from_seq: int = 1) -> int:
        """How many messages ``stream`` holds on ``subject`` (wildcards allowed) at or after
        stream sequence ``from_seq``: the server counts them for a batched direct get of one
        message (its ``Nats-Num-Pending``), so one message travels, whatever the count.

        Raises:
            ClientValidationError: ``from_seq`` is not a positive int, or ``subject`` is empty.
            NoRespondersError: no such stream, or direct get is off.
            RequestTimeoutError: as :meth:`get_last_messages`.
        """
        if isinstance(from_seq, bool) or not isinstance(from_seq, int) or from_seq < 1:
            raise ClientValidationError(f"from_seq must be a stream sequence >= 1: {from_seq!r}")
        if not isinstance(subject, str) or not subject:
            raise ClientValidationError(f"subject must be a non-empty string: {subject!r}")
        body = {"seq": from_seq, "batch": 1, "next_by_subj": subject}
        answer = await self._batched_get(stream, body, None, f"count of {subject} on {stream}")
        return len(answer.messages) + answer.pending

    async def _batched_get(
        self, stream: str, body: dict[str, Any], up_to_seq: int | None, what: str
    ) -> _BatchAnswer:
        """A batched direct get, asked again after a failover (a read)."""
        with self._refusal_ends_wait(self._api.direct_get(stream)), self._ended_by_close(what):
            return await self._failover(
                lambda: self._batch(stream, body, up_to_seq, what),
                still_there=lambda: self._serves_direct_get(stream),
                retry_timeouts=True,  # as a direct get: a dead replica's lingering interest
                what=what,
            )

    async def _batch(
        self, stream: str, body: dict[str, Any], up_to_seq: int | None, what: str
    ) -> _BatchAnswer:
        """Collect the answers in the subscription's callback: waiting in ``next_msg`` for
        each of up to 1024 messages cost ~4x the time of the whole rest (160 vs 36 us per
        message). The timeout applies to a pause between messages, as it did there."""
        answer = _BatchAnswer(up_to_seq, what)
        inbox = self._nc.new_inbox()
        with nats_errors(what):
            sub = await self._nc.subscribe(inbox, cb=answer.on_msg)
        router = route_of(self._nc)
        if router is not None:  # answers skip nats-py's pipeline and its header parser
            router.route(sub, answer.on_frame)
        try:
            with nats_errors(what):
                await self._nc.publish(self._api.direct_get(stream), _encode(body), reply=inbox)
            while not answer.done.done():
                seen = len(answer.messages)
                await asyncio.wait([answer.done], timeout=self.timeout)
                if not answer.done.done() and len(answer.messages) == seen:
                    raise RequestTimeoutError(f"{what}: no reply within {self.timeout:g}s")
            answer.done.result()  # the error the server answered, if any
            return answer
        finally:
            if answer.done.done() and not answer.done.cancelled():
                answer.done.exception()  # seen, also by a read cancelled as the error came
            if router is not None:
                router.unroute(sub)
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def _msg_get(self, stream: str, body: dict[str, Any]) -> StoredMessage:
        """The leader-answered ``STREAM.MSG.GET``, for streams without ``allow_direct``."""
        subject = self._api.msg_get(stream)
        reply = await self._request(subject, _encode(body), MsgGetResponse, idempotent=True)
        raw = reply.message
        return StoredMessage(
            subject=raw.subject,
            seq=raw.seq,
            time=raw.time,
            headers=parse_header_block(raw.hdrs),
            data=raw.data,
        )


class _BatchAnswer:
    """The messages of one batched direct get, gathered as they arrive; ``done`` ends with the
    sequence they are consistent as of, or with the error the server answered. ``pending``:
    the messages matching the request beyond those sent (the end of the batch says)."""

    def __init__(self, up_to_seq: int | None, what: str) -> None:
        self.up_to_seq = up_to_seq
        self.what = what
        self.messages: list[StoredMessage] = []
        self.pending = 0
        self.done: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()

    async def on_msg(self, msg: Msg) -> None:
        """An answer through nats-py's pipeline (a client the caller opened)."""
        self._receive(msg.headers or {}, msg.data)

    def on_frame(self, subject: bytes, reply: bytes, block: bytes | None, data: bytes) -> None:
        """An answer routed past nats-py's pipeline (see :mod:`jetstream._transport.delivery`):
        nats-py parses each header name a character at a time, most of a batched get's client
        time."""
        self._receive(parse_headers(block) if block else {}, data)

    def _receive(self, headers: dict[str, str], data: bytes) -> None:
        if self.done.done():
            return
        try:
            status, description = st.status_of(headers)
            if status is None:
                self.messages.append(StoredMessage.from_direct_get(headers, data))
            elif status == st.END_OF_BATCH:
                upto = headers.get(hdr.UPTO_SEQUENCE, self.up_to_seq or 0)
                self.pending = int(headers.get(hdr.NUM_PENDING, 0))
                self.done.set_result(int(upto))
            elif status == st.NOT_FOUND:  # nothing matched
                self.done.set_result(self.up_to_seq)
            else:
                raise st.status_error(status, description, what=self.what)
        except (JetStreamError, ValueError) as exc:
            self.done.set_exception(
                exc if isinstance(exc, JetStreamError) else JetStreamError(f"{self.what}: {exc}")
            )


class _Tries:
    """What each attempt of one retried request got: for the debug log and the final error."""

    def __init__(self, what: str) -> None:
        self._what = what or "request"
        self._outcomes: list[str] = []

    def __len__(self) -> int:
        return len(self._outcomes)

    @property
    def last(self) -> str:
        return self._outcomes[-1]

    def note(self, error: JetStreamError) -> None:
        if isinstance(error, RequestTimeoutError):
            self._outcomes.append("timeout")
        elif isinstance(error, NoRespondersError):
            self._outcomes.append("503 no responders")
        else:
            self._outcomes.append(f"unavailable ({error.err_code or error.code})")

    def explain(self, error: JetStreamError, elapsed: float) -> None:
        """Make the final ``error`` (kept: same class and codes) say what the retries got when
        there were any: ``no reply within 20.3s (5 attempts: 503 no responders x2, timeout x3)``."""
        if len(self._outcomes) > 1:
            error.description = (
                f"{self._what}: {_HEADLINES.get(self.last, 'unavailable')} within "
                f"{math.floor(elapsed * 10) / 10:.1f}s "  # never more than it waited
                f"({len(self._outcomes)} attempts: {self._summary()})"
            )
            error.args = (error.description,)

    def _summary(self) -> str:
        runs: list[tuple[str, int]] = []
        for outcome in self._outcomes:
            if runs and runs[-1][0] == outcome:
                runs[-1] = (outcome, runs[-1][1] + 1)
            else:
                runs.append((outcome, 1))
        return ", ".join(o if n == 1 else f"{o} x{n}" for o, n in runs)


_HEADLINES = {"timeout": "no reply", "503 no responders": "no responders"}


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # no loop runs in this thread
        return None


async def _log_connection_error(error: Exception) -> None:
    # nats-py's messages are not ours: a server URL in one would carry its credentials.
    text = redact_text(str(error))
    if isinstance(error, nats.errors.FlushTimeoutError):
        # A publish waited flush_timeout for a full buffer to drain (a slow link, or a server
        # that died): nothing is lost, the buffer is written in order later. Not a warning.
        _log.debug("nats connection: %s: %s", type(error).__name__, text)
        return
    _log.warning("nats connection: %s: %s", type(error).__name__, text)


def _stored_or_raise(headers: dict[str, str] | None, data: bytes, *, what: str) -> StoredMessage:
    """A direct-get reply is the message, or a status line: 404 not found, 412 API level too
    low, 408 a request the server could not parse."""
    status, description = st.status_of(headers)
    if status is None:
        return StoredMessage.from_direct_get(headers or {}, data)
    raise st.status_error(status, description, what=what)


async def connect(
    servers: str | list[str] = "nats://127.0.0.1:4222",
    *,
    api_prefix: str = DEFAULT_API_PREFIX,
    timeout: float = DEFAULT_TIMEOUT,
    retry_deadline: float = DEFAULT_RETRY_DEADLINE,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    connect_attempts: int = 1,
    **nats_options: Any,
) -> JetStream:
    """Connect to NATS and return a :class:`JetStream` context that owns the connection.

    The first connect tries each server ``connect_attempts`` times (``connect_timeout``
    seconds each, ``reconnect_time_wait`` apart) and then fails: at once for a refused port,
    unlike nats-py's default of two minutes. A server that refuses the credentials is not
    asked again (the answer would not change): a wrong password, token, nkey or expired
    creds raise :class:`AuthenticationError` in milliseconds. Once connected, a lost
    connection is re-established with nats-py's reconnect settings
    (``max_reconnect_attempts``, ``reconnect_time_wait``, ...).

    ``nats_options`` go to :func:`nats.connect` unchanged (user, password, token, tls,
    nkeys_seed, user_credentials, inbox_prefix, reconnect settings, callbacks, ...). Unless an
    ``error_cb`` is given, connection errors after the first connect (each failed reconnect
    attempt, for instance) are logged as one warning line on the ``jetstream`` logger instead of
    nats-py's tracebacks; a failed first connect is logged once. ``servers``: a URL, a list,
    or URLs in one string separated by commas (as ``$NATS_URL`` holds them). URLs may carry
    ``user:password@`` or ``token@`` (as written: nats-py does not %-decode them), which
    errors and log lines never show; the user info runs to the URL's last ``@``, so a
    password may hold ``,`` ``:`` ``@`` ``%`` (in a list, give each URL its scheme), and one
    holding ``/``, ``?`` or ``#`` goes in the ``password`` option.
    ``disconnected_cb``, ``reconnected_cb`` and ``closed_cb`` are called after the context's
    own consumers have been told of the change. ``flush_timeout`` (how long a publish waits
    for nats-py's full outgoing buffer to drain) defaults to ``timeout``, not nats-py's
    unbounded wait.

    Raises:
        ClientValidationError: ``connect_attempts`` below 1, ``connect_timeout`` not positive,
            a connection callback that is not an async function, a server URL nats-py cannot
            parse whole (user info holding ``/``, ``?`` or ``#``, a port that is no number;
            the message quotes nothing of it).
        AuthenticationError: the server refused the credentials.
        ConnectionFailedError: no server could be reached; the message names the cause
            (connection refused, DNS lookup failed, timed out, TLS handshake failed).
    """
    urls = server_list(servers)  # before anything is tried
    contexts: list[JetStream] = []
    user_error_cb = nats_options.pop("error_cb", None)

    async def on_error(error: Exception) -> None:
        for context in contexts:
            context.note_error(error)
        if user_error_cb is not None:
            await user_error_cb(error)
        elif contexts:  # the first connect's failures are logged once, below
            await _log_connection_error(error)

    chain_callbacks(nats_options, lambda: [c.connection_events for c in contexts])
    # nats-py's publish waits for its flusher once its buffer passes max_pending_size, by
    # default without a limit; a server that dies during that wait leaves the wait with
    # nobody to end it (the flusher stops, the reconnect never succeeds) and an upload hung
    # for minutes. Bounded, the publish returns and the caller's own timeouts take over.
    nats_options.setdefault("flush_timeout", timeout)
    try:
        nc = await open_client(
            urls,
            connect_timeout=connect_timeout,
            connect_attempts=connect_attempts,
            error_cb=on_error,
            nats_options=nats_options,
        )
    except ConnectionFailedError as exc:
        _log.warning("nats connection: %s", exc)
        raise
    context = JetStream(
        nc,
        api_prefix=api_prefix,
        timeout=timeout,
        retry_deadline=retry_deadline,
        owns_connection=True,
    )
    context.connection_events.wired = True  # no await since connected: no change missed
    contexts.append(context)
    return context
