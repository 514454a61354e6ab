"""JetStream API subjects and the one request path that decodes replies or raises.

Every JSON API call goes through :func:`request`: it publishes, waits for the reply, raises the
registered error for ``{"error": {...}}`` replies and decodes the typed msgspec response.
"""

from __future__ import annotations

import re
from typing import TypeVar

import msgspec
import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from .._errors import (
    ClientValidationError,
    JetStreamError,
    NoRespondersError,
    RequestTimeoutError,
    error_from_api,
)
from .._protocol.duration import decode_hook
from .._protocol.models import ApiError
from .._protocol.names import validate_name, validate_subject_token
from .._protocol.status import NO_RESPONDERS, status_of
from .._protocol.text import decode_json
from .nats_errors import from_nats

__all__ = ["DEFAULT_API_PREFIX", "ApiSubjects", "raise_for_error", "request", "send"]

DEFAULT_API_PREFIX = "$JS.API"

_NOT_A_SUBJECT = re.compile(r"[ \t\r\n]")  # what nats-py's publish() refuses in a subject

T = TypeVar("T")


class ApiSubjects:
    """The ``$JS.API.*`` subjects, under a prefix (``$JS.<domain>.API`` for a domain).

    Every stream and consumer name is checked with the server's rules before it becomes a
    subject token (:func:`~jetstream._protocol.names.validate_name`), so a name like ``>``,
    ``a.b`` or ``""`` raises :class:`InvalidNameError` at once and nothing is sent; every layer
    above builds its subjects here and inherits the check.
    """

    def __init__(self, prefix: str = DEFAULT_API_PREFIX) -> None:
        self.prefix = prefix.rstrip(".")

    def info(self) -> str:
        return f"{self.prefix}.INFO"

    def stream_create(self, stream: str) -> str:
        return f"{self.prefix}.STREAM.CREATE.{_stream(stream)}"

    def stream_update(self, stream: str) -> str:
        return f"{self.prefix}.STREAM.UPDATE.{_stream(stream)}"

    def stream_info(self, stream: str) -> str:
        return f"{self.prefix}.STREAM.INFO.{_stream(stream)}"

    def stream_delete(self, stream: str) -> str:
        return f"{self.prefix}.STREAM.DELETE.{_stream(stream)}"

    def stream_purge(self, stream: str) -> str:
        return f"{self.prefix}.STREAM.PURGE.{_stream(stream)}"

    def stream_names(self) -> str:
        return f"{self.prefix}.STREAM.NAMES"

    def msg_delete(self, stream: str) -> str:
        return f"{self.prefix}.STREAM.MSG.DELETE.{_stream(stream)}"

    def consumer_create(self, stream: str, name: str, filter_subject: str = "") -> str:
        """``CONSUMER.CREATE.<stream>.<name>[.<filter>]``; the filter form needs exactly one
        ``filter_subject`` in the config."""
        base = f"{self.prefix}.CONSUMER.CREATE.{_stream(stream)}.{_consumer(name)}"
        if not filter_subject:
            return base
        # Only what would break the line: kvstore sizes keys with a prefix ending in '.'.
        return f"{base}.{validate_subject_token(filter_subject, 'filter', tokens=False)}"

    def consumer_info(self, stream: str, name: str) -> str:
        return f"{self.prefix}.CONSUMER.INFO.{_stream(stream)}.{_consumer(name)}"

    def consumer_names(self, stream: str) -> str:
        return f"{self.prefix}.CONSUMER.NAMES.{_stream(stream)}"

    def consumer_delete(self, stream: str, name: str) -> str:
        return f"{self.prefix}.CONSUMER.DELETE.{_stream(stream)}.{_consumer(name)}"

    def consumer_unpin(self, stream: str, name: str) -> str:
        return f"{self.prefix}.CONSUMER.UNPIN.{_stream(stream)}.{_consumer(name)}"

    def consumer_pause(self, stream: str, name: str) -> str:
        return f"{self.prefix}.CONSUMER.PAUSE.{_stream(stream)}.{_consumer(name)}"

    def consumer_next(self, stream: str, name: str) -> str:
        return f"{self.prefix}.CONSUMER.MSG.NEXT.{_stream(stream)}.{_consumer(name)}"

    def msg_get(self, stream: str) -> str:
        return f"{self.prefix}.STREAM.MSG.GET.{_stream(stream)}"

    def direct_get(self, stream: str, subject: str | None = None) -> str:
        """``DIRECT.GET.<stream>`` (JSON body) or ``DIRECT.GET.<stream>.<subject>`` (empty body,
        last message of that subject)."""
        base = f"{self.prefix}.DIRECT.GET.{_stream(stream)}"
        return base if subject is None else f"{base}.{validate_subject_token(subject)}"


def _stream(name: str) -> str:
    return validate_name(name, "stream")


def _consumer(name: str) -> str:
    return validate_name(name, "consumer")


class _ErrorProbe(msgspec.Struct):
    error: ApiError | None = None


_probe_decoder = msgspec.json.Decoder(_ErrorProbe)
_decoders: dict[type[object], msgspec.json.Decoder[object]] = {}


def _decoder(response_type: type[T]) -> msgspec.json.Decoder[T]:
    dec = _decoders.get(response_type)
    if dec is None:
        dec = _decoders[response_type] = msgspec.json.Decoder(response_type, dec_hook=decode_hook)
    return dec  # type: ignore[return-value]


def raise_for_error(error: ApiError | None) -> None:
    """Raise the registered exception for a server error object; do nothing for None."""
    if error is not None:
        raise error_from_api(error.code, error.err_code, error.description)


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


def decode_reply(data: bytes, response_type: type[T], *, subject: str = "") -> T:
    """Decode a JSON API reply, raising the server's error if it carries one.

    Raises:
        JetStreamError: the registered error, or a reply that is not valid JSON for the type.
    """
    try:
        if b'"error"' in data:  # cheap filter; the probe decides
            raise_for_error(decode_json(_probe_decoder.decode, data).error)
        return decode_json(_decoder(response_type).decode, data)
    except msgspec.DecodeError as exc:
        raise JetStreamError(f"undecodable reply on {subject or 'API'}: {data[:200]!r}") from exc
