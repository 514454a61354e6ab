"""Opening and closing the nats-py client under a context: bounded, typed, logged once.

nats-py uses one setting for the first connect and for reconnects (60 attempts 2 s apart per
server), so a dead address blocks a first connect for two minutes. Here the first connect tries
each server ``connect_attempts`` times, then nats-py's own reconnect settings take over for the
rest of the connection's life. A server that refuses the credentials is not asked again during
the first connect (nats-py would retry it like a dead one). Closing never raises and never
waits unbounded, whatever state the client is in.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, Final

import nats.errors
from nats.aio.client import (
    DEFAULT_MAX_RECONNECT_ATTEMPTS,
    DEFAULT_RECONNECT_TIME_WAIT,
    Client,
)

from .._errors import (
    ClientValidationError,
    ConnectionFailedError,
    connection_error,
    is_auth_refusal,
)
from .delivery import DeliveryClient

__all__ = ["answers", "close_client", "describe_failure", "open_client", "reader_gone"]

_TLS_FAILURES = (
    ssl.SSLError,
    ssl.CertificateError,
    nats.errors.SecureConnFailedError,
    nats.errors.SecureConnWantedError,
)

ErrorCallback = Callable[[Exception], Awaitable[None]]

_CLOSE_GRACE: Final = 1.0
"""Seconds a forced close may take after a drain that did not finish (nats-py waits for the
socket to close, forever after a refused TLS handshake)."""


async def open_client(
    servers: list[str],
    *,
    connect_timeout: float,
    connect_attempts: int,
    error_cb: ErrorCallback,
    nats_options: dict[str, Any],
) -> Client:
    """A connected nats-py client; the first connect tries each server ``connect_attempts``
    times, ``connect_timeout`` seconds each (``reconnect_time_wait`` apart).

    Raises:
        ClientValidationError: ``connect_attempts`` below 1 or ``connect_timeout`` not positive.
        ConnectionFailedError, AuthenticationError: no attempt succeeded; the message names
            the cause (refused, DNS, timeout, TLS, credentials).
        ClientValidationError: also for an nkey seed or credentials file that holds no valid
            key (names the file).
    """
    if isinstance(connect_attempts, bool) or not isinstance(connect_attempts, int):
        raise ClientValidationError(f"connect_attempts must be an int: {connect_attempts!r}")
    if connect_attempts < 1:
        raise ClientValidationError(f"connect_attempts must be at least 1: {connect_attempts}")
    if not connect_timeout > 0:
        raise ClientValidationError(f"connect_timeout must be positive: {connect_timeout!r}")
    reconnect_attempts = nats_options.pop("max_reconnect_attempts", DEFAULT_MAX_RECONNECT_ATTEMPTS)
    failures: list[BaseException] = []

    nc = DeliveryClient()

    async def on_error(error: Exception) -> None:
        _close_failed_attempt(nc)
        if is_auth_refusal(error):
            _stop_trying_server(nc, connect_attempts)
        failures.append(error)
        await error_cb(error)

    wait = float(nats_options.get("reconnect_time_wait", DEFAULT_RECONNECT_TIME_WAIT))
    budget = _first_connect_budget(len(servers), connect_attempts, connect_timeout, wait)
    failed: ConnectionFailedError | ClientValidationError | None = None
    try:
        # nats-py drops a server once its failed attempts exceed max_reconnect_attempts, and
        # never for 0: attempts - 0.5 drops it after exactly ``connect_attempts`` failures.
        connecting = nc.connect(
            servers,
            error_cb=on_error,
            connect_timeout=connect_timeout,  # type: ignore[arg-type]  # float works
            max_reconnect_attempts=connect_attempts - 0.5,  # type: ignore[arg-type]
            **nats_options,
        )
        # Bounded as a whole: after a refused TLS handshake nats-py waits forever for the
        # socket to close, inside connect().
        await _within(connecting, budget, nc)
    except (nats.errors.Error, OSError, TimeoutError) as exc:
        await _close_quietly(nc, _CLOSE_GRACE)  # nats-py leaves a failed client's socket open
        reported = failures if isinstance(exc, TimeoutError) and failures else [*failures, exc]
        failed = connection_error(servers, reported, describe=describe_failure)
    except _KEY_FILE_ERRORS as exc:
        await _close_quietly(nc, _CLOSE_GRACE)
        failed = ClientValidationError(
            f"{_key_files(nats_options)} holds no valid nkey ({type(exc).__name__})"
        )
    if failed is not None:
        # Raised outside the handler, so nothing of nats-py's is chained: its exceptions may
        # quote a URL's password (a '#' or '/' in it: "Port could not be cast ... 'S3cret'"),
        # and tracebacks print every chained one. The message names the cause, redacted.
        raise failed
    nc.options["max_reconnect_attempts"] = reconnect_attempts  # reconnects: nats-py's settings
    return nc


async def _within(connecting: Awaitable[None], budget: float, nc: Client) -> None:
    """Await nats-py's ``connect()`` for at most ``budget`` seconds; a cancel of the caller
    (Ctrl-C) ends it at once.

    Not ``asyncio.wait_for``: on Python 3.11 a cancel that lands as nats-py's own
    ``wait_for`` around the TCP connect completes is swallowed there, and connect() then
    waited ``connect_timeout`` for a silent server's INFO (Ctrl-C ignored for a minute). The
    attempt is cancelled until it has ended, and its socket closed.

    Raises:
        TimeoutError: ``budget`` passed.
    """
    task = asyncio.ensure_future(connecting)
    try:
        done, _ = await asyncio.wait([task], timeout=budget)
    except asyncio.CancelledError:
        await _stop_connecting(task, nc)
        raise
    if not done:
        await _stop_connecting(task, nc)
        raise TimeoutError
    task.result()


async def _stop_connecting(task: asyncio.Future[None], nc: Client) -> None:
    while not task.done():
        _close_failed_attempt(nc)
        task.cancel()
        await asyncio.wait([task], timeout=0.05)  # a swallowed cancel is repeated
    if not task.cancelled():
        task.exception()  # retrieved: the attempt's own error is not the caller's


def reader_gone(nc: Client) -> bool:
    """Whether ``nc`` counts as connected while its reading task has ended: an event loop
    shutting down cancelled it (``asyncio.run`` cancels every task still running when the
    main coroutine returns). No reply can come any more, and nothing will tell nats-py that
    its server went away (writes then fail on the socket, or go nowhere)."""
    task = nc._reading_task
    return nc.is_connected and task is not None and task.done()


async def answers(nc: Client, timeout: float) -> bool:
    """Whether the server answers a ping within ``timeout`` seconds (False at once when
    ``nc`` is not connected, closed, or reads nothing any more); never raises."""
    if not nc.is_connected or reader_gone(nc):
        return False
    try:
        await nc.flush(timeout)  # type: ignore[arg-type]  # a float works: asyncio.wait_for
    except Exception:  # timed out, disconnected or closed meanwhile
        return False
    return True


def _nkeys_errors() -> tuple[type[Exception], ...]:
    try:
        from nkeys import NkeysError  # type: ignore[import-untyped]  # optional: auth extra
    except ImportError:  # pragma: no cover - nats-py refuses nkey options without it
        return ()
    return (NkeysError,)


_KEY_FILE_ERRORS: Final = _nkeys_errors()
"""What nats-py raises, unwrapped, for a seed or credentials file that holds no valid key."""


def _key_files(nats_options: dict[str, Any]) -> str:
    given = [
        f"{option} {value!r}"
        for option in ("nkeys_seed", "user_credentials")
        if isinstance(value := nats_options.get(option), str)
    ]
    return " or ".join(given) or "the nkey given"


def _first_connect_budget(servers: int, attempts: int, timeout: float, wait: float) -> float:
    """The longest a first connect may take: per attempt a TCP connect and the wait for the
    server's INFO (``timeout`` each), ``wait`` between attempts, and a second for the rest."""
    return servers * attempts * 2 * timeout + (attempts - 1) * wait + 1.0


def _stop_trying_server(nc: Client, attempts: int) -> None:
    """Make the first connect give up on the server that just refused the credentials:
    asking it again with the same credentials gets the same answer (nats-py would retry it,
    ``reconnect_time_wait`` apart, as if it were down), so a wrong password fails in
    milliseconds whatever ``connect_attempts`` is. Other servers of the list are still tried.
    Only while connecting the first time: once connected, nats-py's reconnect rules apply."""
    server = nc._current_server
    if server is not None and nc.is_connecting:
        server.reconnects = max(server.reconnects, attempts)  # + nats-py's own 1 > the limit


def _close_failed_attempt(nc: Client) -> None:
    """Close the socket of a connect attempt that failed after its TCP connect (no INFO in
    time, a refused handshake): nats-py reuses the transport for the next attempt without
    closing it, and the socket leaks (seen when a restarted node accepted before it was ready).
    Only while (re)connecting: an error reported on a live connection must not touch it."""
    transport = nc._transport
    if transport is not None and (nc.is_connecting or nc.is_reconnecting):
        transport.close()  # type: ignore[no-untyped-call]  # nats-py leaves it unannotated


def describe_failure(error: BaseException) -> str:
    """What made one connect attempt fail, in words a user can act on."""
    if isinstance(error, ConnectionRefusedError):
        return f"connection refused ({error})"
    if isinstance(error, socket.gaierror):
        return f"DNS lookup failed ({error})"
    if isinstance(error, _TLS_FAILURES):
        return f"TLS handshake failed ({error})"
    if isinstance(error, TimeoutError):  # asyncio's and nats-py's timeouts are TimeoutErrors
        return "timed out"
    if isinstance(error, ConnectionFailedError):
        return str(error)
    return str(error) or type(error).__name__


async def close_client(nc: Client, *, timeout: float) -> None:
    """Close ``nc`` whatever its state, within about ``timeout`` seconds (twice that at
    worst), without raising.

    A connected client is flushed first (a ping answered: what was published reached the
    server), then closed; one that is connecting or reconnecting is closed at once, which also
    stops its reconnect attempts for good. nats-py's ``drain()`` is not used: cancelled while
    it waits for its subscriptions, it swallows the cancel and waits out its own 10 s flush
    when the server stops answering, and logs their cancelled drains as an exception never
    retrieved. Messages a subscription had received but not yet handed out are dropped, as
    they would be on a lost connection (unacknowledged ones are redelivered).
    """
    if nc.is_closed:
        return
    if nc.is_connected:
        with contextlib.suppress(Exception):  # a server that stopped answering: close below
            await nc.flush(timeout)  # type: ignore[arg-type]  # a float works: asyncio.wait_for
    await _close_quietly(nc, timeout)


async def _close_quietly(nc: Client, timeout: float) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(nc.close(), timeout)
