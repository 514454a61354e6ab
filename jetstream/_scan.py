"""A one-shot, point-in-time listing of a stream, on an :class:`OrderedConsumer`.

Used where many subjects must be listed (KV ``purge_deletes``, batch lookups): direct get's
``multi_last`` stops at 1024 subjects (413 Too Many Results), a consumer does not. The scan
ends once every message that existed when it started has been delivered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ._consumer import OrderedConsumer
from ._context import JetStream
from ._message import StoredMessage

__all__ = ["scan_stream"]


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
    """
    policy = "last_per_subject" if last_per_subject else "all"
    async with OrderedConsumer(
        js,
        stream,
        filter_subjects=filters,
        deliver_policy=policy,
        headers_only=headers_only,
        until_caught_up=True,
    ) as consumer:
        async for message in consumer:
            meta = message.metadata
            yield StoredMessage(
                subject=message.subject,
                seq=meta.stream_seq,
                time=meta.time,
                headers=message.headers,
                data=message.data,
            )
