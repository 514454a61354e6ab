"""Consumer administration through an :class:`ApiClient`: create or update, look up, delete,
unpin, pause and list (see the :class:`JetStream` methods of the same names for what each
raises)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Literal

import msgspec
from nats.nuid import NUID

from .._errors import ClientValidationError
from .._protocol.json_api import encode_request
from .._protocol.models import (
    ConsumerConfig,
    ConsumerInfo,
    ConsumerNamesResponse,
    ConsumerPauseResponse,
    SuccessResponse,
)
from .._protocol.names import validate_priority_group
from .client import ApiClient
from .streams import pages

__all__ = [
    "consumer_info",
    "consumer_names",
    "create_consumer_info",
    "delete_consumer",
    "pause_consumer",
    "unpin_consumer",
]


async def create_consumer_info(
    client: ApiClient,
    stream: str,
    config: ConsumerConfig,
    *,
    action: Literal["create", "update", ""] = "create",
) -> ConsumerInfo:
    """Create (or with ``action`` update / create-or-update) a consumer; return its info. A
    config without a name gets a generated one; exactly one ``filter_subject`` takes the
    filtered create subject, so permissions can be granted per filter."""
    name = config.name or config.durable_name
    if not name:
        name = NUID().next().decode()
        config = msgspec.structs.replace(config, name=name)
    filter_token = config.filter_subject if not config.filter_subjects else ""
    subject = client.api.consumer_create(stream, name, filter_token)
    body = encode_request({"stream_name": stream, "config": config, "action": action})
    return await client.request(subject, body, ConsumerInfo, idempotent=True)


async def consumer_info(client: ApiClient, stream: str, name: str) -> ConsumerInfo:
    """A consumer's configuration and state."""
    subject = client.api.consumer_info(stream, name)
    return await client.request(subject, b"", ConsumerInfo, idempotent=True)


async def delete_consumer(client: ApiClient, stream: str, name: str) -> None:
    """Delete a consumer."""
    await client.request(client.api.consumer_delete(stream, name), b"", SuccessResponse)


async def unpin_consumer(client: ApiClient, stream: str, consumer: str, group: str) -> None:
    """Release the pin of a ``pinned_client`` priority group."""
    subject = client.api.consumer_unpin(stream, consumer)
    body = encode_request({"group": validate_priority_group(group)})
    await client.request(subject, body, SuccessResponse)


async def pause_consumer(
    client: ApiClient, stream: str, consumer: str, until: datetime | None
) -> bool:
    """Hold a consumer's deliveries until ``until`` (None: resume now); returns whether it is
    paused."""
    if until is not None and (not isinstance(until, datetime) or until.tzinfo is None):
        raise ClientValidationError(f"until must be an aware datetime or None, not {until!r}")
    subject = client.api.consumer_pause(stream, consumer)
    body = b"{}" if until is None else encode_request({"pause_until": until})
    reply = await client.request(subject, body, ConsumerPauseResponse, idempotent=True)
    return reply.paused


async def consumer_names(client: ApiClient, stream: str) -> AsyncIterator[str]:
    """The names of a stream's consumers."""
    subject = client.api.consumer_names(stream)
    async for page in pages(client, subject, {}, ConsumerNamesResponse):
        for name in page.consumers or []:
            yield name
