"""A one-shot, point-in-time listing of a stream, on an :class:`OrderedConsumer`.

Used where many subjects must be listed (KV ``purge_deletes``, ``keys``): direct get's
``multi_last`` stops at 1024 subjects (413 Too Many Results), a consumer does not. The scan
ends once every message that existed when it started has been delivered.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable

from .. import headers as hdr
from .._api.client import ApiClient
from .._api.direct_get import get_last_message, get_next_message
from .._errors import MessageNotFoundError
from .._protocol.message import StoredMessage
from .ordered import OrderedConsumer
from .pull_message import PullMessage

__all__ = ["find_by_msg_id", "scan_stream"]


async def scan_stream(
    js: ApiClient,
    stream: str,
    filters: list[str],
    *,
    last_per_subject: bool = True,
    headers_only: bool = False,
    ends_scan: Callable[[PullMessage], bool] | None = None,
    start_seq: int = 0,
    max_messages: int | None = None,
) -> AsyncGenerator[StoredMessage, None]:
    """Yield the messages of ``stream`` matching ``filters`` as of now, in stream order.

    With ``last_per_subject`` only the newest message of each subject is delivered; with
    ``headers_only`` payloads are left out (``Nats-Msg-Size`` tells their length);
    ``ends_scan`` as in :class:`OrderedConsumer`; ``start_seq`` (> 0) starts at that stream
    sequence instead, with every message from there; ``max_messages`` bounds the window (a
    read of a range: :func:`range_window`). Close the iterator when leaving early
    (``contextlib.aclosing``): its consumer is deleted then.

    Raises:
        StreamNotFoundError: no such stream.
        ClientValidationError: a negative ``start_seq``.
    """
    policy = "last_per_subject" if last_per_subject else "all"
    async with OrderedConsumer(
        js,
        stream,
        filter_subjects=filters,
        deliver_policy=policy,
        headers_only=headers_only,
        until_caught_up=True,
        ends_scan=ends_scan,
        opt_start_seq=start_seq,
        max_messages=max_messages,
    ) as consumer:
        async for message in consumer:
            meta = message.metadata
            yield StoredMessage(
                subject=message.subject,
                seq=meta.stream_seq,
                time_ns=meta.time_ns,
                headers=message.headers,
                data=message.data,
            )


async def find_by_msg_id(
    js: ApiClient, stream: str, subject: str, msg_id: str
) -> StoredMessage | None:
    """The message of ``subject`` carrying ``Nats-Msg-Id: msg_id``: usually the subject's last
    one, else searched in its history (a later write may have followed it). None if absent.

    Read from the stream leader only: this decides whether an in-doubt write was stored, and a
    replica that is still catching up (after a partition or restart) would say "absent".

    Raises:
        JetStreamError: the stream cannot be read.
    """
    try:
        latest = await get_last_message(js, stream, subject, direct=False)
        if latest.headers.get(hdr.MSG_ID) == msg_id:
            return latest
        seq = 1
        while seq < latest.seq:  # the subject's history, oldest first, up to its last message
            stored = await get_next_message(js, stream, subject, seq, direct=False)
            if stored.headers.get(hdr.MSG_ID) == msg_id:
                return stored
            seq = stored.seq + 1
    except MessageNotFoundError:  # nothing on the subject (or purged meanwhile)
        return None
    return None
