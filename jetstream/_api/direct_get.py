"""Reading stored messages by sequence or subject: direct get (any replica answers), the
leader's ``STREAM.MSG.GET``, and batched direct gets whose answers are gathered as they
arrive (see the :class:`JetStream` methods of the same names for what each raises)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from nats.aio.msg import Msg

from .. import headers as hdr
from .._errors import (
    ClientValidationError,
    JetStreamError,
    NoRespondersError,
    RequestTimeoutError,
    StreamNotFoundError,
)
from .._protocol import status as st
from .._protocol.json_api import encode_request
from .._protocol.message import StoredMessage, parse_header_block, parse_headers, timestamp_ns
from .._protocol.models import MsgGetResponse, StreamInfo
from .._transport.delivery import route_of
from .._transport.nats_errors import nats_errors
from .._transport.requests import request
from .client import ApiClient, failover

__all__ = [
    "count_messages",
    "get_last_message",
    "get_last_messages",
    "get_message",
    "get_next_message",
]


async def get_last_message(
    client: ApiClient, stream: str, subject: str, *, direct: bool | None = True
) -> StoredMessage:
    """The last message stored on ``subject`` (``direct=None``: direct get, else the leader)."""
    return await _get(client, stream, {"last_by_subj": subject}, direct, what=subject)


async def get_next_message(
    client: ApiClient, stream: str, subject: str, seq: int, *, direct: bool | None = True
) -> StoredMessage:
    """The first message on ``subject`` at or after stream sequence ``seq``."""
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        raise ClientValidationError(f"seq must be a stream sequence >= 1: {seq!r}")
    if not isinstance(subject, str) or not subject:
        raise ClientValidationError(f"subject must be a non-empty string: {subject!r}")
    query = {"seq": seq, "next_by_subj": subject}
    return await _get(client, stream, query, direct, what=f"{subject} from {seq}")


async def get_message(
    client: ApiClient, stream: str, seq: int, *, direct: bool | None = True
) -> StoredMessage:
    """The message with stream sequence ``seq``."""
    return await _get(client, stream, {"seq": seq}, direct, what=f"sequence {seq}")


async def _get(
    client: ApiClient, stream: str, query: dict[str, Any], direct: bool | None, *, what: str
) -> StoredMessage:
    """One stored message: direct get (any replica; the last-by-subject form of the subject
    needs no JSON body), the leader's ``STREAM.MSG.GET`` (``direct=False``), or direct get
    falling back to the leader when nobody serves it (``direct=None``)."""
    if direct is None:
        try:
            return await _get(client, stream, query, True, what=what)
        except NoRespondersError:
            return await _get(client, stream, query, False, what=what)
    if not direct:
        return await _msg_get(client, stream, query)
    subject = query.get("last_by_subj")
    get = client.api.direct_get(stream, subject)
    body = b"" if subject else encode_request(query)
    msg = await failover(
        client,
        lambda: client.send(get, body),
        still_there=lambda: _serves_direct_get(client, stream),
        retry_timeouts=True,  # a read: asking again is safe (a dead replica's lingering
        what=get,  # interest, or a paused server, times out one attempt, not the call)
    )
    return _stored_or_raise(msg.headers, msg.data, what=what)


async def get_last_messages(
    client: ApiClient, stream: str, subjects: list[str], *, up_to_seq: int | None = None
) -> tuple[list[StoredMessage], int | None]:
    """The last message of each of ``subjects`` as of ``up_to_seq``, in one batched get."""
    body: dict[str, Any] = {"multi_last": subjects}
    if up_to_seq is not None:
        body["up_to_seq"] = up_to_seq
    what = f"batched direct get on {stream}"
    answer = await _batched_get(client, stream, body, up_to_seq, what)
    return answer.messages, answer.done.result()


async def count_messages(client: ApiClient, stream: str, subject: str, *, from_seq: int = 1) -> int:
    """How many messages ``stream`` holds on ``subject`` from ``from_seq`` on."""
    if isinstance(from_seq, bool) or not isinstance(from_seq, int) or from_seq < 1:
        raise ClientValidationError(f"from_seq must be a stream sequence >= 1: {from_seq!r}")
    if not isinstance(subject, str) or not subject:
        raise ClientValidationError(f"subject must be a non-empty string: {subject!r}")
    body = {"seq": from_seq, "batch": 1, "next_by_subj": subject}
    answer = await _batched_get(client, stream, body, None, f"count of {subject} on {stream}")
    return len(answer.messages) + answer.pending


async def _batched_get(
    client: ApiClient, stream: str, body: dict[str, Any], up_to_seq: int | None, what: str
) -> _BatchAnswer:
    """A batched direct get, asked again after a failover (a read)."""
    with client.awaiting_reply(client.api.direct_get(stream), what):
        return await failover(
            client,
            lambda: _batch(client, stream, body, up_to_seq, what),
            still_there=lambda: _serves_direct_get(client, stream),
            retry_timeouts=True,  # as a direct get: a dead replica's lingering interest
            what=what,
        )


async def _batch(
    client: ApiClient, stream: str, body: dict[str, Any], up_to_seq: int | None, what: str
) -> _BatchAnswer:
    """Collect the answers in the subscription's callback: waiting in ``next_msg`` for
    each of up to 1024 messages cost ~4x the time of the whole rest (160 vs 36 us per
    message). The timeout applies to a pause between messages, as it did there."""
    answer = _BatchAnswer(up_to_seq, what)
    inbox = client.nc.new_inbox()
    with nats_errors(what):
        sub = await client.nc.subscribe(inbox, cb=answer.on_msg)
    router = route_of(client.nc)
    if router is not None:  # answers skip nats-py's pipeline and its header parser
        router.route(sub, answer.on_frame)
    try:
        with nats_errors(what):
            await client.nc.publish(
                client.api.direct_get(stream), encode_request(body), reply=inbox
            )
        while not answer.done.done():
            seen = len(answer.messages)
            await asyncio.wait([answer.done], timeout=client.timeout)
            if not answer.done.done() and len(answer.messages) == seen:
                raise RequestTimeoutError(f"{what}: no reply within {client.timeout:g}s")
        answer.done.result()  # the error the server answered, if any
        return answer
    finally:
        if answer.done.done() and not answer.done.cancelled():
            answer.done.exception()  # seen, also by a read cancelled as the error came
        if router is not None:
            router.unroute(sub)
        with contextlib.suppress(Exception):
            await sub.unsubscribe()


async def _msg_get(client: ApiClient, stream: str, body: dict[str, Any]) -> StoredMessage:
    """The leader-answered ``STREAM.MSG.GET``, for streams without ``allow_direct``."""
    subject = client.api.msg_get(stream)
    reply = await client.request(subject, encode_request(body), MsgGetResponse, idempotent=True)
    raw = reply.message
    try:
        time_ns = timestamp_ns(raw.time)
    except ValueError as exc:
        raise JetStreamError(f"malformed message get reply: {exc}") from exc
    return StoredMessage(
        subject=raw.subject,
        seq=raw.seq,
        time_ns=time_ns,
        headers=parse_header_block(raw.hdrs),
        data=raw.data,
    )


async def _serves_direct_get(client: ApiClient, stream: str) -> bool:
    """Whether a 503 from a direct get can be an election: the stream exists with
    ``allow_direct`` (otherwise nobody will ever answer)."""
    try:
        info = await request(
            client.nc, client.api.stream_info(stream), b"", StreamInfo, timeout=client.timeout
        )
    except StreamNotFoundError:
        return False
    return info.config.allow_direct


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


def _stored_or_raise(headers: dict[str, str] | None, data: bytes, *, what: str) -> StoredMessage:
    """A direct-get reply is the message, or a status line: 404 not found, 412 API level too
    low, 408 a request the server could not parse."""
    status, description = st.status_of(headers)
    if status is None:
        return StoredMessage.from_direct_get(headers or {}, data)
    raise st.status_error(status, description, what=what)
