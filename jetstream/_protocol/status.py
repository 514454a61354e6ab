"""The status lines of JetStream's header-only answers, and the one mapping into the error tree.

Pulls, direct gets, publishes without a stream and fast-ingest replies answer with a
``NATS/1.0 <status> <description>`` header line instead of a JSON body. Call sites read it with
:func:`status_of`, compare against the constants below (never string literals), and turn the
statuses that are errors into exceptions with :func:`status_error` (beside the ``err_code``
registry of :mod:`jetstream._errors`, which maps JSON error bodies).
"""

from __future__ import annotations

from typing import Final

from .. import headers as hdr
from .._errors import (
    ConsumerDeletedError,
    JetStreamError,
    MessageNotFoundError,
    MessageTooLargeForPullError,
    NoRespondersError,
    PinIdMismatchError,
    ServerError,
    UnsupportedServerFeatureError,
)

__all__ = [
    "BAD_REQUEST",
    "BATCH_COMPLETED",
    "CONFLICT",
    "CONSUMER_DELETED",
    "END_OF_BATCH",
    "EXCEEDED",
    "HEARTBEAT",
    "LEADERSHIP_CHANGE",
    "NOT_FOUND",
    "NO_RESPONDERS",
    "PIN_MISMATCH",
    "PRECONDITION_FAILED",
    "REQUEST_TIMEOUT",
    "SIZE_EXCEEDS_MAX_BYTES",
    "TOO_MANY_RESULTS",
    "status_error",
    "status_of",
]

HEARTBEAT: Final = "100"
"""Idle heartbeat or flow control (pulls): activity, not an answer."""
END_OF_BATCH: Final = "204"
"""A batched direct get (``multi_last``) is complete."""
BAD_REQUEST: Final = "400"
"""The request was malformed (pull options out of range, for instance)."""
NOT_FOUND: Final = "404"
"""No message: a direct get matched nothing, or a no-wait pull found nothing to deliver."""
REQUEST_TIMEOUT: Final = "408"
"""A pull expired; a direct get the server could not parse."""
CONFLICT: Final = "409"
"""A pull ended early (consumer deleted, limits exceeded, leadership change)."""
PRECONDITION_FAILED: Final = "412"
"""The server's API level is too low for the request."""
PIN_MISMATCH: Final = "423"
"""A pinned_client priority group's pull whose ``id`` is not the pin (server 2.15.1 says
``Nats-Wrong-Pin-Id``, with ``Nats-Pending-*``), at once for a new pull, and for a waiting pull
when the next message goes to another client or the pin expired."""
TOO_MANY_RESULTS: Final = "413"
"""A batched direct get asked for more than the server answers at once."""
NO_RESPONDERS: Final = "503"
"""Nobody listens on the subject: no stream, no consumer, no leader (yet)."""

_DESCRIPTION: Final = "Description"  # where nats-py puts the text after the status code

CONSUMER_DELETED: Final = "Consumer Deleted"
"""The description of the 409 that ends every pull of a deleted consumer."""
SIZE_EXCEEDS_MAX_BYTES: Final = "Message Size Exceeds MaxBytes"
"""409: the next message is larger than what the pull has left (with ``Nats-Pending-*``)."""
BATCH_COMPLETED: Final = "Batch Completed"
"""409: the pull's batch was delivered with bytes left (with ``Nats-Pending-*``)."""
LEADERSHIP_CHANGE: Final = "Leadership Change"
"""409: the consumer's leader moved; every waiting pull is dropped."""
EXCEEDED: Final = "Exceeded "
"""Prefix of the 409s refusing a pull over a consumer limit: ``Exceeded MaxRequestBatch of 3``,
``... MaxRequestExpires of 2s``, ``... MaxRequestMaxBytes of 1000``, ``Exceeded MaxWaiting``."""


def status_of(headers: dict[str, str] | None, *, reply: str = "") -> tuple[str | None, str]:
    """The status and its description from a message's headers; ``(None, "")`` for a message
    that carries data.

    nats-py reports a status line and a header line named ``Status`` alike, and any client may
    store a message with such a header. A stored message is never a status: a delivery has a
    ``reply`` (its ack subject; pass it), a direct-get answer a ``Nats-Sequence`` header (a
    value stored with ``Status: 404`` made every read of it end as "not found", and a watch
    re-pull it forever)."""
    if not headers:
        return None, ""
    status = headers.get(hdr.STATUS)
    if status is None or reply or hdr.SEQUENCE in headers:
        return None, ""
    return status, str(headers.get(_DESCRIPTION, "")).strip()


def status_error(
    status: str,
    description: str,
    *,
    what: str,
    default: type[ServerError] = ServerError,
    note: str = "",
) -> JetStreamError:
    """The error for a status answer to ``what``; ``default`` (e.g. :class:`PullRequestError`)
    for a status without a more specific class; ``note`` ends the message (what the caller
    does about it).

    Callers first handle the statuses that are not errors where they read them (a heartbeat,
    the end of a pull or of a batch)."""
    text = f"{what}: {status} {description}".rstrip() + note
    code = int(status) if status.isdigit() else 0
    if status == NO_RESPONDERS:
        return NoRespondersError(f"{what}: no responders{note}", code=503)
    if status == NOT_FOUND:
        return MessageNotFoundError(text, code=404)
    if status == PRECONDITION_FAILED:
        return UnsupportedServerFeatureError(text, code=412)
    if status == PIN_MISMATCH:
        return PinIdMismatchError(text, code=423)
    if status == CONFLICT and description == CONSUMER_DELETED:
        return ConsumerDeletedError(f"{what}: consumer deleted{note}", code=409)
    if status == CONFLICT and description == SIZE_EXCEEDS_MAX_BYTES:
        return MessageTooLargeForPullError(text, code=409)  # only when it can never fit
    return default(text, code=code)
