"""Session: a nats-py connection in the hands of one context. It owns the connection's
lifecycle (closed, which event loop it belongs to, what its listeners hear) and the
request/reply path every API call, publish and pull takes, which fails at once when the
server refuses the subject or the connection closes, instead of after a timeout."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

from .. import headers as hdr
from .._errors import (
    ConnectionClosedError,
    PermissionDeniedError,
    WrongEventLoopError,
    check_bytes_like,
)
from .._protocol.limits import check_subject_length
from .._resource import AsyncResource
from .connection import close_client, reader_gone
from .denials import Denials
from .events import ConnectionEvent, ConnectionEvents
from .requests import send

__all__ = ["DEFAULT_TIMEOUT", "Session"]

DEFAULT_TIMEOUT = 5.0
"""Seconds to wait for an API reply or a publish ack (nats.go's default)."""


class Session(AsyncResource):
    """A nats-py client, its lifecycle and its request path (the base of a JetStream context).

    ``owns_connection``: :meth:`close` closes the client too (a context :func:`connect` made).
    """

    def __init__(
        self, nc: Client, *, timeout: float = DEFAULT_TIMEOUT, owns_connection: bool = False
    ) -> None:
        self._nc = nc
        self.timeout = timeout
        self.denials = Denials()
        """Turns the server's permission violations into prompt errors (see ``note_error``)."""
        self._owns_connection = owns_connection
        # The loop the connection reads and writes in (the first that uses the context when
        # it is made outside one): see ensure_open.
        self._loop = _running_loop()
        self._closed = False
        self._waiting: set[asyncio.Task[Any]] = set()  # tasks waiting in send() for a reply
        self._cut_off: set[asyncio.Task[Any]] = set()  # ... whose wait close() ended
        self._connection_events = ConnectionEvents()
        self._connection_events.add(self._on_connection_event)

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
            "loop that uses it (with asyncio.run: inside the coroutine it runs)"
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
            WrongTypeError: a payload that is not bytes-like (nothing is sent).
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
        check_bytes_like(payload, "payload")
        if headers:
            hdr.validate_headers(headers)  # nats-py would send an empty or broken name as is
        # Subjects may hold names from other clients' records (a link's target, a nuid).
        check_subject_length(self._nc, subject)
        with self.awaiting_reply(subject, f"request on {subject}"):
            return await send(
                self._nc, subject, payload, timeout=timeout or self.timeout, headers=headers
            )

    @contextlib.contextmanager
    def awaiting_reply(self, subject: str, what: str) -> Iterator[None]:
        """The current task waits in this block for the server's reply to a request on
        ``subject`` (``what`` names it in errors): the wait ends at once with
        :class:`PermissionDeniedError` when the server refuses the subject, and with
        :class:`ConnectionClosedError` once :meth:`close` has closed the connection, instead
        of running out its timeout."""
        with self._refusal_ends_wait(subject), self._ended_by_close(what):
            yield

    @contextlib.contextmanager
    def _refusal_ends_wait(self, subject: str) -> Iterator[None]:
        """No task per request (this is every put's path): a denial cancels the waiting task,
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
        """A cancel that arrives in the loop step that delivers the reply is kept: Python
        3.11's ``asyncio.wait_for`` (nats-py's request and ``next_msg``) returns the reply and
        drops the cancel, and a watch cancelled while creating its consumer then waited
        forever."""
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

    def _reply_inbox_refused(self) -> PermissionDeniedError | None:
        """The server's refusal of nats-py's shared reply-inbox subscription, if it refused it
        (a user connected without the inbox prefix its permissions allow). It is refused once,
        failing the first request at once; later requests would only time out."""
        inbox = self._reply_inbox()
        return None if inbox is None else self.denials.recent([inbox])

    def _reply_inbox(self) -> str | None:
        """The subject of nats-py's shared reply-inbox subscription (None before the first
        request subscribes it); tests/jetstream/test_request_contract.py checks its shape."""
        prefix = getattr(self._nc, "_resp_sub_prefix", None)
        return prefix.decode() + "*" if prefix else None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # no loop runs in this thread
        return None
