"""The options every verb takes (connection, ``--json``, ``--quiet``, ``--debug``) and the
one place a verb connects, runs and ends with its exit code.

Connection options follow natscli's names and environment variables: ``--server``
(``$NATS_URL``), ``--creds`` (``$NATS_CREDS``), ``--nkey`` (``$NATS_NKEY``), ``--user`` /
``--password`` (``$NATS_USER`` / ``$NATS_PASSWORD``), ``--token`` (``$NATS_TOKEN``),
``--tlscert`` / ``--tlskey`` / ``--tlsca``, ``--timeout``. They may appear anywhere on the
line (:mod:`jetstore._shared_options`), as natscli allows.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import click

import jetstream

from ._endings import Terminated, discard_stdout, ended_by_sigterm, stdout_closed
from ._output import (
    EXIT_OK,
    EXIT_OUTPUT_CLOSED,
    EXIT_TERMINATED,
    report_error,
    setup_logging,
)
from ._shared_options import DEFAULT_TIMEOUT, given_settings, with_shared_options

__all__ = ["Settings", "guarded", "local_verb", "run", "verb"]


@dataclasses.dataclass(frozen=True, repr=False)
class Settings:
    """What the shared options of one invocation say."""

    server: str | None = None
    creds: str | None = None
    nkey: str | None = None
    user: str | None = None
    password: str | None = None
    token: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    json: bool = False
    quiet: bool = False
    debug: bool = False

    def __repr__(self) -> str:  # secrets never shown (the server URLs may hold some)
        return f"Settings(json={self.json}, quiet={self.quiet}, debug={self.debug})"

    def connect_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :func:`jetstream.connect` (they go on to nats-py).

        Raises:
            click.UsageError: no server, a password without a user, a key without a cert.
        """
        if not self.server:
            raise click.UsageError(
                "no server: give --server nats://host:port or set NATS_URL "
                "(`jetstore server` runs one for development)"
            )
        kwargs: dict[str, Any] = {
            "timeout": self.timeout,
            "connect_timeout": self.timeout,
            "name": "jetstore-cli",
        }
        if self.password is not None and self.user is None:
            raise click.UsageError("--password needs --user")
        if self.user is not None:
            kwargs["user"] = self.user
            kwargs["password"] = self.password or ""
        if self.token is not None:
            kwargs["token"] = self.token
        if self.creds is not None:
            kwargs["user_credentials"] = self.creds
        if self.nkey is not None:
            kwargs["nkeys_seed"] = self.nkey
        tls = self._tls()
        if tls is not None:
            kwargs["tls"] = tls
        return kwargs

    def _tls(self) -> ssl.SSLContext | None:
        if self.tls_key is not None and self.tls_cert is None:
            raise click.UsageError("--tlskey needs --tlscert")
        if self.tls_ca is None and self.tls_cert is None:
            return None
        context = ssl.create_default_context(cafile=self.tls_ca)
        if self.tls_cert is not None:
            context.load_cert_chain(self.tls_cert, self.tls_key)
        return context

    async def connect(self) -> jetstream.JetStream:
        """A connection for this invocation (one attempt per server: a dead address fails
        in about ``--timeout`` seconds at most, a refused port at once).

        Raises:
            click.UsageError: see :meth:`connect_kwargs`.
            ClientValidationError, ConnectionFailedError, AuthenticationError: as
                :func:`jetstream.connect` (a URL it cannot parse whole; unreachable; refused).
        """
        kwargs = self.connect_kwargs()
        # Split by the library, which never cuts a URL's user info (a password with a ',').
        return await jetstream.connect(self.server or "", **kwargs)


def verb(function: Callable[..., None]) -> Callable[..., None]:
    """Give a verb the connection and output options; it is called with a :class:`Settings`
    first, made of those options wherever on the line they were given."""
    return _with_settings(function, connects=True)


def local_verb(function: Callable[..., None]) -> Callable[..., None]:
    """Give a verb that connects to nothing (``server``) only the output options."""
    return _with_settings(function, connects=False)


def _with_settings(function: Callable[..., None], *, connects: bool) -> Callable[..., None]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        ctx = click.get_current_context()
        settings = Settings(**given_settings(ctx, connects=connects))
        setup_logging(debug=settings.debug)
        function(settings, *args, **kwargs)

    return with_shared_options(wrapper, connects=connects)


def run(
    settings: Settings,
    work: Callable[[jetstream.JetStream], Awaitable[int | None]],
    *,
    interrupt_ok: bool = False,
) -> None:
    """Connect, run ``work(js)``, close, and end the verb with the exit code: ``work``'s own
    (None = 0) or the documented code of the error that ended it, printed as one line.
    ``interrupt_ok``: Ctrl-C is the normal end of this verb (watches), exit 0.

    Raises:
        click.exceptions.Exit: always, carrying the exit code.
    """

    async def connected() -> int | None:
        with ended_by_sigterm():
            async with await settings.connect() as js:
                return await work(js)

    raise click.exceptions.Exit(guarded(settings, lambda: asyncio.run(connected()), interrupt_ok))


def guarded(settings: Settings, call: Callable[[], int | None], interrupt_ok: bool = False) -> int:
    """Run ``call`` and turn what ends it into an exit code (printing the error)."""
    try:
        return call() or EXIT_OK
    except click.ClickException:
        raise  # usage errors: main() prints them the click way, exit 2
    except KeyboardInterrupt as exc:
        if interrupt_ok:
            return EXIT_OK
        return report_error(exc, debug=settings.debug)
    except Terminated:
        if interrupt_ok:
            return EXIT_OK
        click.echo("jetstore: terminated", err=True)
        return EXIT_TERMINATED
    except BrokenPipeError as exc:
        if not stdout_closed():
            return report_error(exc, debug=settings.debug)
        discard_stdout()
        return EXIT_OK if interrupt_ok else EXIT_OUTPUT_CLOSED
    except Exception as exc:
        return report_error(exc, debug=settings.debug)
