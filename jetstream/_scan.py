"""A bounded, one-shot scan of a stream through a short-lived ephemeral pull consumer.

Used where a point-in-time listing of many subjects is needed (KV ``purge_deletes``): direct
get's ``multi_last`` stops at 1024 subjects (413 Too Many Results), a consumer does not. The
consumer's ``num_pending`` at creation bounds the scan; it ends when the last delivered
message reports ``pending`` 0. The full simplified consumer (ADR-37) lives in ``_consumer``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import nats.errors
from nats.aio.msg import Msg
from nats.nuid import NUID

from . import headers as hdr
from ._api import request
from ._context import JetStream
from ._errors import JetStreamError, RequestTimeoutError
from ._message import StoredMessage, parse_ack_reply
from ._models import ConsumerInfo, SuccessResponse

__all__ = ["scan_stream"]

_PULL_BATCH = 1000
_PULL_EXPIRES_NS = 5_000_000_000
_INACTIVE_NS = 30_000_000_000  # the server removes the consumer if we die mid-scan


async def scan_stream(
    js: JetStream,
    stream: str,
    filters: list[str],
    *,
    last_per_subject: bool = True,
    headers_only: bool = False,
) -> AsyncIterator[StoredMessage]:
    """Yield the messages of ``stream`` matching ``filters`` as of now, in stream order.

    With ``last_per_subject`` only the newest message of each subject is delivered; with
    ``headers_only`` payloads are left out (``Nats-Msg-Size`` tells their length).

    Raises:
        StreamNotFoundError: no such stream.
        RequestTimeoutError: the server stopped delivering before the scan was complete.
    """
    name = NUID().next().decode()
    config: dict[str, Any] = {
        "name": name,
        "deliver_policy": "last_per_subject" if last_per_subject else "all",
        "ack_policy": "none",
        "filter_subjects": filters,
        "mem_storage": True,
        "num_replicas": 1,
        "inactive_threshold": _INACTIVE_NS,
    }
    if headers_only:
        config["headers_only"] = True
    body = msgspec.json.encode({"stream_name": stream, "config": config, "action": "create"})
    info = await request(
        js.nc, js.api.consumer_create(stream, name), body, ConsumerInfo, timeout=js.timeout
    )
    try:
        if info.num_pending:
            async for message in _drain(js, stream, name):
                yield message
    finally:
        # Best effort: inactive_threshold removes the consumer anyway.
        with contextlib.suppress(JetStreamError, nats.errors.Error):
            subject = js.api.consumer_delete(stream, name)
            await request(js.nc, subject, b"", SuccessResponse, timeout=js.timeout)


async def _drain(js: JetStream, stream: str, name: str) -> AsyncIterator[StoredMessage]:
    inbox = js.nc.new_inbox()
    sub = await js.nc.subscribe(inbox)
    pull = msgspec.json.encode({"batch": _PULL_BATCH, "expires": _PULL_EXPIRES_NS})
    try:
        await js.nc.publish(js.api.consumer_next(stream, name), pull, reply=inbox)
        while True:
            msg = await _next(sub, timeout=_PULL_EXPIRES_NS / 1e9 + js.timeout)
            status = (msg.headers or {}).get(hdr.STATUS)
            if status is not None:
                if status in ("404", "408", "409"):  # this pull ended early: ask again
                    await js.nc.publish(js.api.consumer_next(stream, name), pull, reply=inbox)
                    continue
                if status == "100":
                    continue
                raise JetStreamError(f"scan of {stream} stopped: status {status}")
            ack = parse_ack_reply(msg.reply)
            yield StoredMessage(
                subject=msg.subject,
                seq=ack.stream_seq,
                time=ack.time,
                headers=dict(msg.headers or {}),
                data=msg.data,
            )
            if ack.pending == 0:
                return
            if ack.consumer_seq % _PULL_BATCH == 0:  # batch used up: next pull
                await js.nc.publish(js.api.consumer_next(stream, name), pull, reply=inbox)
    finally:
        await sub.unsubscribe()


async def _next(sub: Any, *, timeout: float) -> Msg:
    try:
        msg: Msg = await sub.next_msg(timeout=timeout)
    except nats.errors.TimeoutError as exc:
        raise RequestTimeoutError(f"scan: no message within {timeout:g}s") from exc
    return msg
