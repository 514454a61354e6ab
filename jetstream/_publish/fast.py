"""FastPublisher: ADR-50 fast-ingest batch publish with server-driven flow control.

Each message's reply subject carries the protocol: ``<inbox>.<id>.<flow>.<gap>.<seq>.<op>.$FI``
(op 0 start, 1 append, 2 commit-and-store, 3 commit by end-of-batch, 4 ping). Every answer of
the server arrives on one inbox subscription, dropped at the end:

* ``{"type":"ack","seq":N,"msgs":M}``: everything up to batch sequence N is persisted; ack again
  after M more. A later ack covers lost earlier ones.
* ``{"type":"gap","last_seq":L,"seq":S}``: [L, S) was lost; with ``gap="fail"`` the batch ends.
* ``{"type":"err","seq":S,"error":{...}}``: message S was refused (an expected-sequence check,
  an invalid TTL...).
* the final pub ack ``{"stream","seq","batch","count"}``, or an error pub ack.

We stall while ``acked + flow * max_outstanding <= sent`` and ping (op 4) while stalled and while
waiting for the commit, so a lost ack or a leader change cannot hang the publisher. The final
ack is success-shaped even when messages were lost (protocol.md 3.5, reliability 2a-i): it is
accepted only if ``count`` equals what was sent and no gap or error was reported.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Literal

import msgspec
import nats.errors
from nats.aio.msg import Msg
from nats.nuid import NUID

from .._api.client import ApiClient, Feature
from .._errors import (
    BatchClosedError,
    ClientValidationError,
    FastBatchError,
    JetStreamError,
    PermissionDeniedError,
    RequestTimeoutError,
)
from .._protocol.json_api import raise_for_error
from .._protocol.models import ApiError, PubAck
from .._protocol.status import status_error, status_of
from .._resource import BatchPublisherResource
from .._transport.nats_errors import nats_errors
from ..headers import validate_headers

__all__ = ["FastPublisher"]

_START, _APPEND, _COMMIT, _EOB, _PING = 0, 1, 2, 3, 4


class _FlowMessage(msgspec.Struct):
    """Any message on the control inbox: a flow ack, gap, err, or a (final or error) pub ack."""

    type: str = ""
    seq: int = 0
    msgs: int = 0
    last_seq: int = 0
    error: ApiError | None = None
    stream: str = ""
    batch: str = ""
    count: int = 0
    duplicate: bool = False


_decode = msgspec.json.Decoder(_FlowMessage).decode


class FastPublisher(BatchPublisherResource):
    """Publish many messages to one stream (``allow_batched``) with server flow control.

    ::

        async with FastPublisher(js) as batch:
            for chunk in chunks:
                await batch.add(subject, chunk)
            ack = await batch.commit()          # or leave the block: commits by end-of-batch

    ``flow`` is the most messages between acks we accept (the server may ask for fewer and
    ramps up concurrent publishers), ``max_outstanding`` how many ack intervals may be in
    flight, ``gap`` is ``"fail"`` (default: any loss ends the batch) or ``"ok"``. ``timeout``
    bounds every wait for the server; pings go out every ``timeout / 3`` while waiting.
    Leaving the block with an exception abandons the batch (:meth:`abandon`).
    """

    def __init__(
        self,
        js: ApiClient,
        *,
        flow: int = 100,
        max_outstanding: int = 2,
        gap: Literal["fail", "ok"] = "fail",
        timeout: float | None = None,
    ) -> None:
        if not 1 <= flow <= 65535 or max_outstanding < 1:
            raise ClientValidationError("flow must be 1..65535 and max_outstanding positive")
        if gap not in ("fail", "ok"):
            raise ClientValidationError(f"gap must be 'fail' or 'ok': {gap!r}")
        self._js = js
        self._flow_limit = flow
        self._max_outstanding = max_outstanding
        self._gap = gap
        self._timeout = timeout or js.timeout
        self.batch_id = NUID().next().decode()
        self._inbox = ""
        self._sub: object = None
        self._sent = 0
        self._acked = 0
        self._flow = 1  # until the server says otherwise
        self._flow_seen = False  # the start ack (or a final ack) arrived
        self._last_subject = ""
        self._progress = asyncio.Event()
        self._final: _FlowMessage | None = None
        self._problems: list[str] = []
        self._failure: JetStreamError | None = None
        self._closed = False
        self._denial: str | None = None  # the subject watched for a refusal
        self._eob_answered = False  # the server answered our end-of-batch (abandon)

    @property
    def sent(self) -> int:
        """Messages sent so far."""
        return self._sent

    @property
    def problems(self) -> list[str]:
        """Gaps and refused messages the server reported (tolerated only with ``gap="ok"``)."""
        return list(self._problems)

    @property
    def acked(self) -> int:
        """The highest batch sequence the server confirmed persisted."""
        return self._acked

    # -- giving up (leaving the block with an error calls it) -----------------------------------

    async def abandon(self) -> None:
        """End the batch now and wait until the server settled every message sent, so that
        nothing sent is stored after this returns (a message still in flight would otherwise
        be stored later, e.g. after the caller purged the batch's subject). Waits at most
        ``timeout`` for the answer; never raises a server or connection error (the batch is
        being given up). Does nothing after a commit.

        An end-of-batch message (op 3) closes the batch: the server handles a connection's
        messages in order, so its answer (the final ack, or "batch unknown" when the batch had
        already failed) comes after every earlier message was stored or refused.
        """
        if self._closed or self._final is not None or not self._sent or not self._inbox:
            await self._close()
            return
        try:
            seq = max(2, self._sent + 1)  # an EOB needs seq >= 2
            await self._js.nc.publish(self._last_subject, b"", reply=self._reply(seq, _EOB))
            self._failure = None  # wait for the EOB's answer, not the error that got us here
            await self._wait(lambda: self._eob_answered, "answer to the end-of-batch")
        except (JetStreamError, nats.errors.Error, OSError):
            pass  # the server is unreachable: what it may still store, cleanup() removes
        finally:
            await self._close()

    async def _close(self) -> None:
        self._closed = True
        if self._denial is not None:
            self._js.denials.forget(self._denial, self._refused)
            self._denial = None
        if self._sub is not None:
            sub, self._sub = self._sub, None
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()  # type: ignore[attr-defined]

    # -- sending ------------------------------------------------------------------------------

    def _reply(self, seq: int, op: int) -> str:
        return f"{self._inbox}.{self.batch_id}.{self._flow_limit}.{self._gap}.{seq}.{op}.$FI"

    async def _open(self) -> None:
        await self._js.require(Feature.FAST_INGEST)
        self._js.ensure_open()
        nc = self._js.nc
        inbox = nc.new_inbox()
        with nats_errors("fast batch"):
            self._sub = await nc.subscribe(f"{inbox}.>", cb=self._on_reply)
        self._inbox = inbox

    def _watch_denial(self, subject: str) -> None:
        """A refused subject fails the batch at once rather than after the timeout."""
        self._js.denials.watch(subject, self._refused)
        self._denial = subject

    def _refused(self, error: PermissionDeniedError) -> None:
        self._failure = error
        self._progress.set()

    async def add(self, subject: str, data: bytes, headers: dict[str, str] | None = None) -> None:
        """Send one message, waiting first if the flow window is full.

        Raises:
            BatchClosedError: after commit or failure.
            InvalidHeaderError: an empty or malformed header name, CR/LF in a value (nothing
                is sent, the batch is unchanged).
            UnsupportedServerFeatureError: the server has no fast ingest (before 2.14).
            BatchPublishDisabledError, FastBatchError, NoRespondersError: the server refused or
                lost the batch; RequestTimeoutError: no answer within the timeout.
            ConnectionClosedError, DisconnectedError: the connection is closed, or down with
                its reconnect buffer full.
        """
        self._check_usable()
        if headers:
            validate_headers(headers)  # before anything is counted or sent
        if not self._inbox:
            await self._open()
        seq = self._sent + 1
        await self._wait_for_window(seq)
        if seq == 1:
            self._watch_denial(subject)
        self._last_subject = subject
        op = _START if seq == 1 else _APPEND
        # Counted before the await: nats-py buffers the message, then awaits a flush; cancelled
        # there, the message still goes out, and abandon() must settle it.
        self._sent = seq
        await self._publish(subject, data, self._reply(seq, op), headers)
        if seq == 1:  # the start ack tells the flow, and a refused stream fails fast
            await self._wait(lambda: self._flow_seen, "the first flow ack")

    async def commit(
        self,
        subject: str | None = None,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> PubAck:
        """Commit the batch: with ``data``, store it as the last message (op 2); without, close
        the batch by an end-of-batch message (op 3). Returns the validated final pub ack.

        Raises:
            FastBatchError: the final ack does not cover every message sent, or a gap or a
                refused message was reported (the message names the last persisted sequence).
            BatchPublishDisabledError, NoRespondersError, RequestTimeoutError: as :meth:`add`.

        After an error or a cancellation the batch is not settled yet: :meth:`abandon` (which
        leaving the ``async with`` block calls) waits for the server before giving it up.
        """
        self._check_usable()
        if headers:
            validate_headers(headers)
        if data is not None:
            if not self._inbox:
                await self._open()
            seq = self._sent + 1
            await self._wait_for_window(seq)
            if seq == 1:
                self._watch_denial(subject or self._last_subject)
            reply = self._reply(seq, _COMMIT)
            target = subject or self._last_subject
            await self._publish(target, data, reply, headers)
            self._sent = seq
        elif self._sent == 0:
            raise FastBatchError("nothing to commit: a fast batch needs at least one message")
        else:
            eob = self._reply(self._sent + 1, _EOB)
            await self._publish(subject or self._last_subject, b"", eob)
        # Not closed on an error or a cancel: messages may still be in flight, and abandon()
        # (leaving the ``async with`` block, or an upload's cleanup) settles them first.
        await self._wait(lambda: self._final is not None, "the final ack", ping=True)
        await self._close()
        return self._validated_final()

    async def _publish(
        self, subject: str, data: bytes, reply: str, headers: dict[str, str] | None = None
    ) -> None:
        with nats_errors(f"fast batch {self.batch_id}"):
            await self._js.nc.publish(subject, data, reply=reply, headers=headers)

    def _check_usable(self) -> None:
        if self._closed:
            raise BatchClosedError("the fast batch was committed or failed")
        if self._failure is not None:
            raise self._failure
        self._js.ensure_open()  # closed, or used from another event loop

    async def _wait_for_window(self, seq: int) -> None:
        if seq == 1:
            return
        await self._wait(
            lambda: self._acked + self._flow * self._max_outstanding >= seq,
            "a flow ack",
            ping=True,
        )

    async def _wait(self, ready: Callable[[], bool], what: str, *, ping: bool = False) -> None:
        """Wait until ``ready()``; ping every timeout/3; fail after ``timeout`` of silence."""
        loop = asyncio.get_running_loop()
        silent_since = loop.time()
        while not ready():
            if self._failure is not None:
                raise self._failure
            self._progress.clear()
            try:
                await asyncio.wait_for(self._progress.wait(), self._timeout / 3)
                silent_since = loop.time()
            except TimeoutError:
                if loop.time() - silent_since >= self._timeout:
                    error = RequestTimeoutError(
                        f"fast batch {self.batch_id}: no {what} within {self._timeout:g}s"
                    )
                    self._failure = error
                    raise error from None
                if ping and self._sent:
                    await self._publish(self._last_subject, b"", self._reply(self._sent, _PING))
        if self._failure is not None and not ready():
            raise self._failure

    # -- receiving ----------------------------------------------------------------------------

    async def _on_reply(self, msg: Msg) -> None:
        if msg.subject.endswith(f".{_EOB}.$FI"):
            self._eob_answered = True
        status, description = status_of(msg.headers)
        if status is not None:  # 503: no stream listens on the subject
            what = f"fast batch to {self._last_subject}"
            self._failure = status_error(status, description, what=what)
        elif msg.data:
            self._on_flow_message(_decode(msg.data))
        self._progress.set()

    def _on_flow_message(self, message: _FlowMessage) -> None:
        if message.type == "ack":
            self._acked = max(self._acked, message.seq)  # a later ack covers earlier ones
            self._flow = max(1, message.msgs)
            self._flow_seen = True
        elif message.type == "gap":
            self._problems.append(f"lost messages {message.last_seq}..{message.seq - 1}")
        elif message.type == "err":
            error = message.error or ApiError()
            refused = f"message {message.seq} refused: {error.description} ({error.err_code})"
            self._problems.append(refused)
        elif message.error is not None:  # an error pub ack: the batch is gone
            try:
                raise_for_error(message.error)
            except JetStreamError as exc:
                self._failure = exc
        elif message.stream:
            self._final = message
            self._flow_seen = True

    def _validated_final(self) -> PubAck:
        final = self._final
        assert final is not None
        if final.count != self._sent or (self._problems and self._gap == "fail"):
            problems = "; ".join(self._problems) or "messages missing"
            raise FastBatchError(
                f"fast batch {self.batch_id}: {final.count} of {self._sent} messages persisted "
                f"(last persisted sequence {final.count}): {problems}",
                last_persisted=final.count,
            )
        return PubAck(stream=final.stream, seq=final.seq, batch=final.batch, count=final.count)
