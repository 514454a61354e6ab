"""Stream administration through an :class:`ApiClient`: create, update, look up, purge,
delete, list, and find the stream that stores a subject (see the :class:`JetStream`
methods of the same names for what each raises)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeVar

from .._protocol.json_api import encode_request
from .._protocol.models import (
    ConsumerNamesResponse,
    PurgeResponse,
    StreamConfig,
    StreamInfo,
    StreamNamesResponse,
    SuccessResponse,
)
from .._transport.requests import request
from .client import ApiClient

__all__ = [
    "add_stream",
    "delete_message",
    "delete_stream",
    "pages",
    "purge_stream",
    "stream_for_subject",
    "stream_info",
    "stream_names",
    "subject_has_stream",
    "update_stream",
]

P = TypeVar("P", StreamNamesResponse, ConsumerNamesResponse)


async def add_stream(client: ApiClient, config: StreamConfig) -> StreamInfo:
    """Create a stream (an identical one again is not an error)."""
    subject = client.api.stream_create(config.name)
    return await client.request(subject, encode_request(config), StreamInfo, idempotent=True)


async def update_stream(client: ApiClient, config: StreamConfig) -> StreamInfo:
    """Replace a stream's configuration."""
    subject = client.api.stream_update(config.name)
    return await client.request(subject, encode_request(config), StreamInfo, idempotent=True)


async def stream_info(client: ApiClient, name: str) -> StreamInfo:
    """A stream's configuration and state."""
    return await client.request(client.api.stream_info(name), b"", StreamInfo, idempotent=True)


async def delete_stream(client: ApiClient, name: str) -> None:
    """Delete a stream and all its messages."""
    await client.request(client.api.stream_delete(name), b"", SuccessResponse)


async def purge_stream(
    client: ApiClient, name: str, *, subject: str | None = None, keep: int | None = None
) -> int:
    """Remove a stream's messages (those of ``subject``, keeping the newest ``keep``); returns
    how many were removed."""
    body: dict[str, Any] = {}
    if subject is not None:
        body["filter"] = subject
    if keep is not None:
        body["keep"] = keep
    payload = encode_request(body) if body else b""
    purge = client.api.stream_purge(name)  # purging twice removes nothing more
    reply = await client.request(purge, payload, PurgeResponse, idempotent=True)
    return reply.purged


async def stream_names(client: ApiClient, *, subject: str | None = None) -> AsyncIterator[str]:
    """The names of all streams (or of those listening on ``subject``)."""
    query = {} if subject is None else {"subject": subject}
    async for page in pages(client, client.api.stream_names(), query, StreamNamesResponse):
        for name in page.streams or []:
            yield name


async def delete_message(client: ApiClient, stream: str, seq: int, *, erase: bool = False) -> None:
    """Delete one message by stream sequence (``erase`` overwrites it on disk)."""
    body = encode_request({"seq": seq} if erase else {"seq": seq, "no_erase": True})
    await client.request(client.api.msg_delete(stream), body, SuccessResponse)


async def stream_for_subject(client: ApiClient, subject: str) -> str | None:
    """The name of the stream that stores ``subject`` (None if no stream does)."""
    body = encode_request({"offset": 0, "subject": subject})
    names = client.api.stream_names()
    page = await client.request(names, body, StreamNamesResponse, idempotent=True)
    return next(iter(page.streams or []), None)


async def subject_has_stream(client: ApiClient, subject: str) -> bool:
    """Whether a stream listens on ``subject``: one request, never retried (how a write's 503
    is told apart from an election)."""
    body = encode_request({"offset": 0, "subject": subject})
    page = await request(
        client.nc, client.api.stream_names(), body, StreamNamesResponse, timeout=client.timeout
    )
    return bool(page.streams)


async def pages(
    client: ApiClient, subject: str, query: dict[str, Any], page_type: type[P]
) -> AsyncIterator[P]:
    """The pages of a paged names listing, fetched one after another by offset."""
    offset = 0
    while True:
        body = encode_request({"offset": offset, **query})
        page = await client.request(subject, body, page_type, idempotent=True)
        yield page
        offset += page.count
        if page.count == 0 or offset >= page.total:
            return
