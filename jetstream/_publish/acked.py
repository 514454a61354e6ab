"""AckedPublisher: many messages to one stream, in order, each with its own pub ack, at most
``window`` unanswered at a time. The flow-controlled path for streams without ``allow_batched``
(where :class:`FastPublisher` is refused), with the same interface (add, commit, abandon).

Every message is published from one coroutine in call order, with the reply subject
``<inbox>.<n>``; one subscription collects the answers. Nothing is retried: a resent message
could land after its successors, and order is the data. A lost message therefore shows as an
answer that never comes, and fails the publisher after ``timeout`` of silence.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import nats.errors
from nats.aio.msg import Msg

from .._api.client import ApiClient
from .._errors import (
    BatchClosedError,
    ClientValidationError,
    JetStreamError,
    PermissionDeniedError,
    RequestTimeoutError,
)
from .._protocol.json_api import decode_reply
from .._protocol.models import PubAck
from .._protocol.status import status_error, status_of
from .._resource import BatchPublisherResource
from .._transport.nats_errors import nats_errors
from ..headers import validate_headers

__all__ = ["AckedPublisher"]


class AckedPublisher(BatchPublisherResource):
    """Publish messages in order with at most ``window`` of them unacknowledged.

    ::

        async with AckedPublisher(js, window=32) as pub:
            for chunk in chunks:
                await pub.add(subject, chunk)
            ack = await pub.commit()        # waits for every ack; or leave the block

    ``timeout`` (default: the context's) bounds every wait for an answer. Leaving the block
    with an exception abandons it (:meth:`abandon`). Unlike a batch nothing is atomic: each
    message is stored on its own as it arrives.
    """

    def __init__(self, js: ApiClient, *, window: int = 32, timeout: float | None = None) -> None:
        if isinstance(window, bool) or window < 1:
            raise ClientValidationError(f"window must be positive: {window!r}")
        self._js = js
        self._window = window
        self._timeout = timeout or js.timeout
        self._inbox = ""
        self._sub: object = None
        self._sent = 0
        self._unanswered: set[int] = set()
        self._last_ack: PubAck | None = None
        self._progress = asyncio.Event()
        self._failure: JetStreamError | None = None
        self._closed = False
        self._denial: str | None = None

    @property
    def sent(self) -> int:
        """Messages sent so far."""
        return self._sent

    @property
    def unanswered(self) -> int:
        """Messages sent whose answer has not arrived."""
        return len(self._unanswered)

    async def add(self, subject: str, data: bytes, headers: dict[str, str] | None = None) -> None:
        """Send one message, first waiting while ``window`` messages are unanswered.

        Raises:
            BatchClosedError: after commit, abandon or failure.
            InvalidHeaderError: an empty or malformed header name, CR/LF in a value (nothing
                is sent, the batch is unchanged).
            NoRespondersError: no stream stores ``subject``; PermissionDeniedError: refused;
                JetStreamError: the error a message was answered with; RequestTimeoutError:
                no answer within the timeout.
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
        """
        self._check_usable()
        if headers:
            validate_headers(headers)  # before anything is counted or sent
        if not self._inbox:
            await self._open(subject)
        await self._wait(lambda: len(self._unanswered) < self._window, "an ack")
        seq = self._sent + 1
        self._unanswered.add(seq)
        self._sent = seq
        with nats_errors(f"publishing to {subject}"):
            await self._js.nc.publish(subject, data, reply=f"{self._inbox}.{seq}", headers=headers)

    async def commit(
        self,
        subject: str | None = None,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> PubAck:
        """Send the last message (if given) and wait until every message is acknowledged.
        Returns the ack of the last one.

        Raises:
            BatchClosedError: nothing was sent, or already committed; otherwise as :meth:`add`.

        After an error or a cancellation answers may still be coming: :meth:`abandon` (which
        leaving the ``async with`` block calls) waits for them before giving up.
        """
        if data is not None:
            if subject is None:
                raise ClientValidationError("commit with data needs a subject")
            await self.add(subject, data, headers)
        self._check_usable()
        if not self._sent:
            await self._close()
            raise BatchClosedError("nothing to commit: no message was sent")
        # Not closed on an error or a cancel: answers may still be coming, and abandon()
        # (leaving the ``async with`` block, or an upload's cleanup) waits for them first.
        await self._wait(lambda: not self._unanswered, "every ack")
        await self._close()
        assert self._last_ack is not None
        return self._last_ack

    async def abandon(self) -> None:
        """Stop sending and wait (at most ``timeout`` of silence) until every message sent is
        answered, so none is stored after this returns unless the server stays silent. Never
        raises a server or connection error."""
        if self._closed:
            return
        with contextlib.suppress(JetStreamError):
            await self._wait(
                lambda: not self._unanswered, "the answers of abandoned messages", settle=True
            )
        await self._close()

    # -- internals ----------------------------------------------------------------------------

    async def _open(self, subject: str) -> None:
        nc = self._js.nc
        self._inbox = nc.new_inbox()
        with nats_errors("subscribing for publish acks"):
            self._sub = await nc.subscribe(f"{self._inbox}.>", cb=self._on_reply)
        self._js.denials.watch(subject, self._refused)  # fail at once, not after the timeout
        self._denial = subject

    def _refused(self, error: PermissionDeniedError) -> None:
        self._failure = error
        self._unanswered.clear()  # a refused message is never stored
        self._progress.set()

    def _check_usable(self) -> None:
        if self._closed:
            raise BatchClosedError("the publisher was committed, abandoned or failed")
        if self._failure is not None:
            raise self._failure
        self._js.ensure_open()  # closed, or used from another event loop

    async def _wait(self, ready: Callable[[], bool], what: str, *, settle: bool = False) -> None:
        """Wait until ``ready()``; fail after ``timeout`` without any answer, and at once on a
        failure unless ``settle`` (waiting out the answers of a publisher given up)."""
        while not ready():
            if self._failure is not None and not settle:
                raise self._failure
            self._progress.clear()
            try:
                await asyncio.wait_for(self._progress.wait(), self._timeout)
            except TimeoutError:
                self._failure = RequestTimeoutError(
                    f"no answer for {what} within {self._timeout:g}s "
                    f"({len(self._unanswered)} of {self._sent} messages unanswered)"
                )
                raise self._failure from None
        if self._failure is not None and not settle:
            raise self._failure

    async def _on_reply(self, msg: Msg) -> None:
        try:
            seq = int(msg.subject.rsplit(".", 1)[1])
        except ValueError:
            return
        self._unanswered.discard(seq)
        status, description = status_of(msg.headers)
        if status is not None:  # 503: no stream listens on the subject
            self._fail(status_error(status, description, what=f"publish to {self._denial}"))
        else:
            try:
                ack = decode_reply(msg.data, PubAck, subject=self._denial or "")
            except JetStreamError as exc:
                self._fail(exc)
            else:
                if self._last_ack is None or ack.seq > self._last_ack.seq:
                    self._last_ack = ack
        self._progress.set()

    def _fail(self, error: JetStreamError) -> None:
        if self._failure is None:
            self._failure = error

    async def _close(self) -> None:
        self._closed = True
        if self._denial is not None:
            self._js.denials.forget(self._denial, self._refused)
        if self._sub is not None:
            sub, self._sub = self._sub, None
            with contextlib.suppress(nats.errors.Error, OSError):
                await sub.unsubscribe()  # type: ignore[attr-defined]
