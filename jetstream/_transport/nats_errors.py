"""nats-py's exceptions, translated into the jetstore tree at the few places that call nats-py.

Every call into nats-py that can fail (request, publish, subscribe, pre-encoded frames) runs
inside :func:`nats_errors`, so no ``nats.errors.*`` reaches a user: closed ->
:class:`ConnectionClosedError`, reconnecting or buffer full -> :class:`DisconnectedError`,
timeouts -> :class:`RequestTimeoutError`, and so on. The socket's own errors
(``BrokenPipeError``, ``ConnectionResetError``...) come through nats-py raw when it writes
inline, which it does once its flusher task is gone (an event loop shutting down cancelled
it): they become :class:`DisconnectedError`. The translated error keeps the original as its
``__cause__``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import nats.errors

from .._errors import (
    ClientValidationError,
    ConnectionClosedError,
    DisconnectedError,
    JetStreamError,
    NoRespondersError,
    PermissionDeniedError,
    RequestTimeoutError,
    ValueTooLargeError,
)
from .._protocol.text import not_text

__all__ = ["from_nats", "nats_errors"]

_CLOSED = (nats.errors.ConnectionClosedError, nats.errors.ConnectionDrainingError)
_DOWN = (
    nats.errors.ConnectionReconnectingError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.StaleConnectionError,
    nats.errors.NoServersError,
)
_BAD_INPUT = (nats.errors.BadSubjectError, nats.errors.BadHeaderError)


def from_nats(error: nats.errors.Error | OSError, what: str) -> JetStreamError:
    """The jetstore error for nats-py's ``error`` (or the socket's) raised while doing
    ``what``."""
    text = f"{what}: {error}" if str(error) else what
    if isinstance(error, _CLOSED):
        return ConnectionClosedError(f"{what}: the connection is closed")
    if isinstance(error, _DOWN):
        return DisconnectedError(f"{what}: the connection is down ({type(error).__name__})")
    if isinstance(error, TimeoutError):  # also nats-py's Flush- and DrainTimeoutError
        return RequestTimeoutError(f"{what}: timed out")
    if isinstance(error, nats.errors.NoRespondersError):
        return NoRespondersError(f"{what}: no responders", code=503)
    if isinstance(error, nats.errors.MaxPayloadError):
        return ValueTooLargeError(text)
    if isinstance(error, _BAD_INPUT):
        return ClientValidationError(text)
    if isinstance(error, nats.errors.AuthorizationError):
        return PermissionDeniedError(text)
    if isinstance(error, OSError):  # the socket's: BrokenPipeError, ConnectionResetError...
        return DisconnectedError(f"{what}: the connection is down ({type(error).__name__})")
    return JetStreamError(f"{text} ({type(error).__name__})")


@contextlib.contextmanager
def nats_errors(what: str) -> Iterator[None]:
    """Run a nats-py call; its exceptions come out as :func:`from_nats` says, and a subject or
    header holding a lone surrogate (nats-py encodes them as it sends) as bad input.

    Raises:
        JetStreamError: see :func:`from_nats`; ClientValidationError for a lone surrogate.
    """
    try:
        yield
    except JetStreamError:
        raise  # ours (ConnectionClosedError and DisconnectedError are OSErrors too)
    except (nats.errors.Error, OSError) as exc:
        raise from_nats(exc, what) from exc
    except UnicodeEncodeError as exc:
        raise not_text(exc, what) from None
