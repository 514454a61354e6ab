"""One message published to a stream and its ack awaited, through an :class:`ApiClient`:
503s (no leader) retried, and with a ``Nats-Msg-Id`` an unanswered attempt retried too,
its outcome settled by :class:`~jetstream._publish.fence.Fence` (see
:meth:`JetStream.publish` for what it raises)."""

from __future__ import annotations

import functools

from .. import headers as hdr
from .._api.client import ApiClient, failover
from .._api.streams import stream_for_subject, subject_has_stream
from .._consume.scan import find_by_msg_id
from .._errors import (
    CommitUnknownError,
    JetStreamError,
    PermissionDeniedError,
    WrongLastSequenceError,
)
from .._protocol.json_api import decode_reply
from .._protocol.limits import check_message_size, check_subject_length
from .._protocol.models import PubAck
from .fence import Fence

__all__ = ["publish"]


async def publish(
    client: ApiClient,
    subject: str,
    data: bytes,
    *,
    headers: dict[str, str] | None = None,
    timeout: float | None = None,
    msg_id: str | None = None,
) -> PubAck:
    """Publish ``data`` on ``subject`` and return the stream's ack."""
    if msg_id is not None:
        headers = {**(headers or {}), hdr.MSG_ID: msg_id}
    if headers:
        hdr.validate_headers(headers)
    # The server would close the connection on either: refuse before anything is sent.
    check_subject_length(client.nc, subject)
    check_message_size(client.nc, subject, headers, len(data))
    fence = Fence(msg_id) if msg_id is not None else None

    async def attempt() -> PubAck:
        if fence is not None:
            fence.attempt()
        try:
            msg = await client.send(subject, data, timeout=timeout, headers=headers or None)
            return decode_reply(msg.data, PubAck, subject=subject)
        except JetStreamError as exc:
            if fence is not None:
                fence.failed(exc)
            raise

    try:
        return await failover(
            client,
            attempt,
            still_there=lambda: subject_has_stream(client, subject),
            retry_timeouts=fence is not None,
            what=subject,
        )
    except WrongLastSequenceError:
        # A refused first attempt is definite; a refused retry may be our own echo.
        if fence is None:
            raise
        try:
            lookup = functools.partial(_find_fenced, client, subject, fence.msg_id)
            stored = await fence.settle(lookup)
        except PermissionDeniedError as exc:
            raise CommitUnknownError(
                f"{subject}: write outcome unknown (may not read the stream to learn it: {exc})",
                msg_ids=[fence.msg_id],
            ) from exc
        if stored is None:
            raise
        return stored


async def _find_fenced(client: ApiClient, subject: str, msg_id: str) -> PubAck | None:
    """The ack of an earlier attempt of ``msg_id`` on ``subject`` if it was stored."""
    stream = await stream_for_subject(client, subject)
    if stream is None:
        return None
    stored = await find_by_msg_id(client, stream, subject, msg_id)
    if stored is None:
        return None
    return PubAck(stream=stream, seq=stored.seq, duplicate=True)
