"""The one request path of the JSON API on nats-py: publish, wait for the reply, and raise
the registered error for ``{"error": {...}}`` replies or decode the typed msgspec response.
Contexts add their failover and permission checks on top (:mod:`jetstream._api.client`)."""

from __future__ import annotations

import re
from typing import TypeVar

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from .._errors import ClientValidationError, NoRespondersError, RequestTimeoutError
from .._protocol.json_api import decode_reply
from .._protocol.status import NO_RESPONDERS, status_of
from .nats_errors import from_nats

__all__ = ["request", "send"]

_NOT_A_SUBJECT = re.compile(r"[ \t\r\n]")  # what nats-py's publish() refuses in a subject

T = TypeVar("T")


async def send(
    nc: Client,
    subject: str,
    payload: bytes,
    *,
    timeout: float,
    headers: dict[str, str] | None = None,
) -> Msg:
    """Request/reply with nats-py's errors translated into ours.

    Raises:
        NoRespondersError: nobody is subscribed (no stream, or no leader yet).
        RequestTimeoutError: no reply within ``timeout`` seconds.
        ConnectionClosedError: the connection is closed.
        DisconnectedError: reconnecting, and the outbound buffer is full; or writing to the
            socket failed.
        ClientValidationError: an empty subject, or one with a space, tab, CR or LF.
    """
    if not subject or _NOT_A_SUBJECT.search(subject):
        # Before nats-py registers the reply's future: publish() refusing the subject after
        # that would leave the future in its map for good (request() checks first, too).
        raise ClientValidationError(f"invalid subject {subject[:80]!r}")
    try:
        # nats-py's request() without its last step, which takes any reply with a "Status: 503"
        # header for "no responders": a direct get answering a value another client stored
        # with that header too (status_of tells them apart). publish() validates the subject.
        msg: Msg = await nc._request_new_style(subject, payload, timeout=timeout, headers=headers)
    except nats.errors.TimeoutError as exc:
        raise RequestTimeoutError(f"no reply on {subject} within {timeout:g}s") from exc
    except (nats.errors.Error, OSError) as exc:  # OSError: the socket, written inline
        raise from_nats(exc, f"request on {subject}") from exc
    if status_of(msg.headers)[0] == NO_RESPONDERS:
        raise NoRespondersError(f"no responders on {subject}", code=503)
    return msg


async def request(
    nc: Client,
    subject: str,
    payload: bytes,
    response_type: type[T],
    *,
    timeout: float,
) -> T:
    """Send a JSON API request and decode the reply as ``response_type``.

    Raises:
        JetStreamError: the registered subclass for the server's ``err_code``, or a decode error.
        NoRespondersError, RequestTimeoutError: as :func:`send`.
    """
    msg = await send(nc, subject, payload, timeout=timeout)
    return decode_reply(msg.data, response_type, subject=subject)
