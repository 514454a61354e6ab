"""Connection settings and typed options from string maps (Spark options, CLI flags, env).

Spark hands data sources their options as a case-insensitive map of strings; everything is
parsed and validated here, once, so errors surface at planning time with the option's name.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import ssl
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from typing import Any, TypeVar

from ._api.client import DEFAULT_RETRY_DEADLINE
from ._connect import DEFAULT_CONNECT_TIMEOUT, connect
from ._context import JetStream
from ._errors import ClientValidationError, ColumnError
from ._redact import redact_url
from ._transport.servers import server_list
from ._transport.session import DEFAULT_TIMEOUT

__all__ = [
    "CONNECTION_OPTIONS",
    "ConnectionOptions",
    "bool_option",
    "check_options",
    "int_option",
    "run_sync",
    "str_option",
]


CONNECTION_OPTIONS = (
    "servers",
    "user",
    "password",
    "token",
    "creds",
    "nkeySeedFile",
    "tlsCa",
    "connectTimeout",
    "connectAttempts",
    "requestTimeout",
    "retryDeadline",
    "inboxPrefix",
)
"""The connection options every string-option consumer (the Spark formats) accepts."""

_SECRETS = frozenset({"password", "token"})
"""Fields whose value never appears in a repr (server URLs lose their userinfo instead)."""

T = TypeVar("T")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _norm(name: str) -> str:
    # Spark lower-cases option keys; Python callers may spell them connect_timeout.
    return name.lower().replace("_", "")


def _get(options: Mapping[str, str], name: str) -> str | None:
    for key, value in options.items():
        if _norm(key) == _norm(name):
            return str(value)
    return None


def check_options(options: Mapping[str, str], known: Collection[str], what: str) -> None:
    """Refuse options nobody reads: a misspelled option would otherwise be silently ignored.
    Names compare case-insensitively (Spark lower-cases them) and ignore underscores.

    Raises:
        ClientValidationError: an unknown option; the message lists the known ones.
    """
    accepted = {_norm(name) for name in known}
    unknown = sorted(key for key in options if _norm(key) not in accepted)
    if unknown:
        raise ClientValidationError(
            f"{what}: unknown option(s) {', '.join(map(repr, unknown))}; "
            f"known options: {', '.join(sorted(known, key=str.lower))}"
        )


def int_option(
    options: Mapping[str, str], name: str, default: int, *, low: int = 1, high: int | None = None
) -> int:
    """An integer option within [low, high].

    Raises:
        ClientValidationError: not an integer, or out of range (names the option).
    """
    text = _get(options, name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ClientValidationError(f"option {name!r} must be an integer: {text!r}") from None
    if value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"{low}..{high}"
        raise ClientValidationError(f"option {name!r} must be {bounds}: {value}")
    return value


def bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    """A true/false option.

    Raises:
        ClientValidationError: not a boolean word.
    """
    text = _get(options, name)
    if text is None:
        return default
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise ClientValidationError(f"option {name!r} must be true or false: {text!r}")


def seconds_option(options: Mapping[str, str], name: str, default: T) -> float | T:
    """A positive, finite number of seconds (``default`` when absent).

    Raises:
        ClientValidationError: not a number, not positive, or infinite (names the option).
    """
    text = _get(options, name)
    if text is None:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise ClientValidationError(
            f"option {name!r} must be a positive number of seconds: {text!r}"
        )
    return seconds


def str_option(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    """A string option (None when absent and no default)."""
    text = _get(options, name)
    return default if text is None else text


def named_option(options: Mapping[str, str], name: str) -> str:
    """The bucket or store a source reads: option ``name`` or the load/save path (Spark passes
    it as ``path``), one of them or both naming the same.

    Raises:
        ClientValidationError: neither is given, or they name two different ones (reading
            one of them silently would be reading the wrong data).
    """
    named, path = str_option(options, name), str_option(options, "path")
    if named and path and named != path:
        raise ClientValidationError(
            f"option {name!r} ({named!r}) and the load/save path ({path!r}) differ: give one"
        )
    chosen = named or path
    if not chosen:
        raise ClientValidationError(f"option {name!r} (or a load/save path) is required")
    return chosen


@dataclasses.dataclass(frozen=True, repr=False)
class ConnectionOptions:
    """How to reach NATS, from plain strings. Picklable, so it can travel to Spark executors;
    prefer ``creds`` (a file path) over inline secrets. Secrets never appear in ``repr`` or
    ``str`` (and so in no Spark plan or task repr that holds these options): the password
    and token show as ``'***'``, and server URLs without their ``user:password@`` part."""

    servers: tuple[str, ...]
    user: str | None = None
    password: str | None = None
    token: str | None = None
    creds: str | None = None
    nkey_seed_file: str | None = None
    tls_ca: str | None = None
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    connect_attempts: int = 1
    request_timeout: float = DEFAULT_TIMEOUT
    retry_deadline: float | None = None
    """None: the library's deadlines (20 s for a request, 30 s for an atomic batch's commit)."""
    inbox_prefix: str | None = None

    def __repr__(self) -> str:
        shown = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "servers":
                value = tuple(redact_url(url) for url in value)
            elif field.name in _SECRETS and value is not None:
                value = "***"
            shown.append(f"{field.name}={value!r}")
        return f"ConnectionOptions({', '.join(shown)})"

    @classmethod
    def from_strings(cls, options: Mapping[str, str]) -> ConnectionOptions:
        """Read ``servers`` (comma-separated; default ``$NATS_URL``), ``user``, ``password``,
        ``token``, ``creds``, ``nkeySeedFile``, ``tlsCa``, ``connectTimeout`` (seconds per
        attempt, default 2) and ``connectAttempts`` (tries of the first connect, default 1: a
        dead address fails the task within seconds instead of minutes; refused credentials
        are never tried again, whatever the count), ``requestTimeout`` (seconds a request
        waits for its reply, default 5) and ``retryDeadline`` (seconds a request that got no
        reply or found no leader is tried again, and an atomic batch's commit is resolved:
        by default 20 and 30; together they bound how long a task waits on a server that
        stopped answering) and ``inboxPrefix`` (the user's own reply inbox, as the permission
        templates require). Credentials may also sit in the ``servers`` URLs
        (``nats://user:password@host``); reprs and errors never show them.

        Raises:
            ClientValidationError: no server given, or a malformed value.
        """
        servers = str_option(options, "servers") or os.environ.get("NATS_URL")
        if not servers:
            raise ClientValidationError("option 'servers' is required (or set NATS_URL)")
        return cls(
            servers=tuple(server_list(servers)),
            user=str_option(options, "user"),
            password=str_option(options, "password"),
            token=str_option(options, "token"),
            creds=str_option(options, "creds"),
            nkey_seed_file=str_option(options, "nkeySeedFile"),
            tls_ca=_checked_ca(str_option(options, "tlsCa")),
            connect_timeout=seconds_option(options, "connectTimeout", DEFAULT_CONNECT_TIMEOUT),
            connect_attempts=int_option(options, "connectAttempts", 1, low=1, high=1000),
            request_timeout=seconds_option(options, "requestTimeout", DEFAULT_TIMEOUT),
            retry_deadline=seconds_option(options, "retryDeadline", None),
            inbox_prefix=_inbox_prefix(str_option(options, "inboxPrefix")),
        )

    def nats_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :func:`jetstream.connect` / ``nats.connect``."""
        kwargs: dict[str, Any] = {"connect_timeout": self.connect_timeout}
        if self.user is not None:
            kwargs["user"] = self.user
            kwargs["password"] = self.password
        if self.token is not None:
            kwargs["token"] = self.token
        if self.creds is not None:
            kwargs["user_credentials"] = self.creds
        if self.nkey_seed_file is not None:
            kwargs["nkeys_seed"] = self.nkey_seed_file
        if self.inbox_prefix is not None:
            kwargs["inbox_prefix"] = self.inbox_prefix
        if self.tls_ca is not None:
            kwargs["tls"] = _tls_context(self.tls_ca)
        return kwargs

    async def connect(self) -> JetStream:
        """A new connection (never reuse one across event loops), after at most
        ``connect_attempts`` tries of ``connect_timeout`` seconds each.

        Raises:
            AuthenticationError: the credentials were refused.
            ConnectionFailedError: no server could be reached.
        """
        deadline = self.retry_deadline
        return await connect(
            list(self.servers),
            connect_attempts=self.connect_attempts,
            timeout=self.request_timeout,
            retry_deadline=DEFAULT_RETRY_DEADLINE if deadline is None else deadline,
            **self.nats_kwargs(),
        )

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[JetStream]:
        """``async with options.session() as js``: connect, and close on the way out. Closing
        never raises (:meth:`JetStream.close`), so it never replaces the error that ended the
        block (a dead server fails both).

        Raises:
            AuthenticationError, ConnectionFailedError: as :meth:`connect`; otherwise whatever
                the block raises, unchanged.
        """
        async with await self.connect() as js:  # close() never raises, so never masks
            yield js


def _checked_ca(path: str | None) -> str | None:
    """``path`` once its certificates load (on the driver, at planning: not in every task)."""
    if path is not None:
        _tls_context(path)
    return path


def _tls_context(path: str) -> ssl.SSLContext:
    """A TLS context trusting the CA certificates in ``path``.

    Raises:
        ClientValidationError: the file cannot be read or holds no certificate (names it).
    """
    try:
        return ssl.create_default_context(cafile=path)
    except OSError as exc:  # ssl.SSLError is one
        reason = exc.strerror or getattr(exc, "reason", None) or type(exc).__name__
        raise ClientValidationError(
            f"option 'tlsCa': no CA certificates loaded from {path!r} ({reason})"
        ) from None


def read_columns(
    schema: Any, types: Mapping[str, tuple[str, ...]], source: str
) -> tuple[tuple[str, str], ...]:
    """``(column, type name)`` for each column a Spark read's ``schema`` (a ``StructType``)
    asks for, in its order, lower-cased (Spark matches names case-insensitively): a user
    schema may pick and reorder the columns ``source`` gives.

    Raises:
        ColumnError: a column ``source`` does not have, or of a type it cannot give (``types``
            maps each column to the Spark type names it can; any other failed every task).
    """
    columns = []
    for field in schema.fields:
        name, kind = field.name.lower(), field.dataType.typeName()
        allowed = types.get(name)
        if allowed is None:
            raise ColumnError(f"{source} has no column {field.name!r}; it has {list(types)}")
        if kind not in allowed:
            raise ColumnError(
                f"{source}: column {field.name!r} has type {field.dataType.simpleString()}; "
                f"it must be one of {', '.join(allowed)}"
            )
        columns.append((name, kind))
    return tuple(columns)


def activate_spark_session(spark: Any) -> None:
    """Make ``spark`` the calling thread's active session in the JVM. Spark looks Python data
    sources up in the thread's active session, which a new Python thread lacks (its JVM thread
    does not inherit it). Classic Spark only: Spark Connect has no such per-thread state."""
    jvm = getattr(spark, "_jvm", None)
    session = getattr(spark, "_jsparkSession", None)
    if jvm is not None and session is not None:
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(session)


def run_sync(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from synchronous code, in a fresh event loop: with
    ``asyncio.run`` when this thread has no running loop (Spark executors), otherwise in a
    helper thread (a notebook's driver), so it never fails with "loop already running".

    The loop is new: connect inside the coroutine. A context (and its buckets and stores)
    made in another loop cannot be used there: its calls raise :class:`WrongEventLoopError`
    at once.

    Raises:
        Whatever the coroutine raises, unchanged.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(factory))
    result: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(_awaited(factory)))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, name="jetstream-run-sync")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


async def _awaited(factory: Callable[[], Awaitable[T]]) -> T:
    return await factory()


def _inbox_prefix(text: str | None) -> str | None:
    """The ``inboxPrefix`` option: literal subject tokens (a wildcard would never match a reply).

    Raises:
        ClientValidationError: empty tokens, wildcards, whitespace or control characters.
    """
    if text is None:
        return None
    for token in text.split("."):
        if not token or any(c in "*>" or c.isspace() or ord(c) < 32 for c in token):
            raise ClientValidationError(f"option 'inboxPrefix' must be literal tokens: {text!r}")
    return text
