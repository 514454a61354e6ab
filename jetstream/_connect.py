"""connect(): a nats-py connection opened for a :class:`JetStream` context that owns it, its
callbacks chained to the context's listeners, and its connection errors after the first connect
logged as one line each, without secrets (a failed first connect raises, and logs nothing)."""

from __future__ import annotations

import logging
from typing import Any

import nats.errors

from ._api.client import DEFAULT_RETRY_DEADLINE
from ._context import JetStream
from ._protocol.subjects import DEFAULT_API_PREFIX
from ._redact import redact_text
from ._transport.connection import open_client
from ._transport.events import chain_callbacks
from ._transport.servers import server_list
from ._transport.session import DEFAULT_TIMEOUT

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "connect"]

DEFAULT_CONNECT_TIMEOUT = 2.0
"""Seconds one attempt of the first connect may take (nats-py's default)."""

_log = logging.getLogger("jetstream")


async def connect(
    servers: str | list[str] = "nats://127.0.0.1:4222",
    *,
    api_prefix: str = DEFAULT_API_PREFIX,
    timeout: float = DEFAULT_TIMEOUT,
    retry_deadline: float = DEFAULT_RETRY_DEADLINE,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    connect_attempts: int = 1,
    **nats_options: Any,
) -> JetStream:
    """Connect to NATS and return a :class:`JetStream` context that owns the connection.

    The first connect tries each server ``connect_attempts`` times (``connect_timeout``
    seconds each, ``reconnect_time_wait`` apart) and then fails: at once for a refused port,
    unlike nats-py's default of two minutes. A server that refuses the credentials is not
    asked again (the answer would not change): a wrong password, token, nkey or expired
    creds raise :class:`AuthenticationError` in milliseconds. Once connected, a lost
    connection is re-established with nats-py's reconnect settings
    (``max_reconnect_attempts``, ``reconnect_time_wait``, ...).

    ``nats_options`` go to :func:`nats.connect` unchanged (user, password, token, tls,
    nkeys_seed, user_credentials, inbox_prefix, reconnect settings, callbacks, ...). Unless an
    ``error_cb`` is given, connection errors after the first connect (each failed reconnect
    attempt, for instance) are logged as one warning line on the ``jetstream`` logger instead of
    nats-py's tracebacks; a failed first connect logs nothing (the error it raises says why).
    ``servers``: a URL, a list, or URLs in one string separated by commas (as ``$NATS_URL``
    holds them). URLs may carry ``user:password@`` or ``token@`` (as written: nats-py does not
    %-decode them), which errors and log lines never show; the user info runs to the URL's
    last ``@``, so a password may hold ``,`` ``:`` ``@`` ``%`` (in a list, give each URL its
    scheme), and one holding ``/``, ``?`` or ``#`` goes in the ``password`` option.
    ``disconnected_cb``, ``reconnected_cb`` and ``closed_cb`` are called after the context's
    own consumers have been told of the change. ``flush_timeout`` (how long a publish waits
    for nats-py's full outgoing buffer to drain) defaults to ``timeout``, not nats-py's
    unbounded wait.

    Raises:
        ClientValidationError: ``connect_attempts`` below 1, ``connect_timeout`` not positive,
            a connection callback that is not an async function, a server URL nats-py cannot
            parse whole (user info holding ``/``, ``?`` or ``#``, a port that is no number;
            the message quotes nothing of it).
        AuthenticationError: the server refused the credentials.
        ConnectionFailedError: no server could be reached; the message names the cause
            (connection refused, DNS lookup failed, timed out, TLS handshake failed).
    """
    urls = server_list(servers)  # before anything is tried
    contexts: list[JetStream] = []
    user_error_cb = nats_options.pop("error_cb", None)

    async def on_error(error: Exception) -> None:
        for context in contexts:
            context.note_error(error)
        if user_error_cb is not None:
            await user_error_cb(error)
        elif contexts:  # the first connect's failures end in the error it raises
            await _log_connection_error(error)

    chain_callbacks(nats_options, lambda: [c.connection_events for c in contexts])
    # nats-py's publish waits for its flusher once its buffer passes max_pending_size, by
    # default without a limit; a server that dies during that wait leaves the wait with
    # nobody to end it (the flusher stops, the reconnect never succeeds) and an upload hung
    # for minutes. Bounded, the publish returns and the caller's own timeouts take over.
    nats_options.setdefault("flush_timeout", timeout)
    nc = await open_client(
        urls,
        connect_timeout=connect_timeout,
        connect_attempts=connect_attempts,
        error_cb=on_error,
        nats_options=nats_options,
    )
    context = JetStream(
        nc,
        api_prefix=api_prefix,
        timeout=timeout,
        retry_deadline=retry_deadline,
        owns_connection=True,
    )
    context.connection_events.wired = True  # no await since connected: no change missed
    contexts.append(context)
    return context


async def _log_connection_error(error: Exception) -> None:
    # nats-py's messages are not ours: a server URL in one would carry its credentials.
    text = redact_text(str(error))
    if isinstance(error, nats.errors.FlushTimeoutError):
        # A publish waited flush_timeout for a full buffer to drain (a slow link, or a server
        # that died): nothing is lost, the buffer is written in order later. Not a warning.
        _log.debug("nats connection: %s: %s", type(error).__name__, text)
        return
    _log.warning("nats connection: %s: %s", type(error).__name__, text)
