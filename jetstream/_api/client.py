"""ApiClient: the core every JetStream API call, publish and pull is made through. On a
:class:`~jetstream._transport.session.Session` it adds the API's subjects, JSON requests
retried across leader elections, and the server's capabilities. :class:`~jetstream.JetStream`
is its facade; the modules beside this one take an ``ApiClient``."""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from nats.aio.client import Client

from .._errors import (
    JetStreamError,
    NoRespondersError,
    RequestTimeoutError,
    StreamNotFoundError,
    UnavailableError,
    UnsupportedServerFeatureError,
)
from .._protocol.json_api import decode_reply
from .._protocol.models import AccountInfo, StreamInfo
from .._protocol.subjects import DEFAULT_API_PREFIX, ApiSubjects
from .._transport.session import DEFAULT_TIMEOUT, Session
from .retries import Tries, probe

__all__ = ["DEFAULT_RETRY_DEADLINE", "ApiClient", "Feature", "failover"]

DEFAULT_RETRY_DEADLINE = 20.0
"""Seconds to keep retrying while a stream or JetStream has no leader (elections take 4-12 s
after a leader is killed)."""

T = TypeVar("T")

_log = logging.getLogger("jetstream")


async def _always() -> bool:
    return True


class Feature(enum.Enum):
    """Server features the library uses, with the JetStream API level that brings them."""

    MESSAGE_TTL = ("per-message TTL", 1)
    ATOMIC_BATCH = ("atomic batch publish", 2)
    FAST_INGEST = ("fast-ingest batch publish", 4)
    BATCH_EOB = ("atomic batch commit by end-of-batch message", 4)  # server 2.14

    def __init__(self, label: str, api_level: int) -> None:
        self.label = label
        self.api_level = api_level


class ApiClient(Session):
    """A session that speaks the JetStream API under ``api_prefix``."""

    def __init__(
        self,
        nc: Client,
        *,
        api_prefix: str = DEFAULT_API_PREFIX,
        timeout: float = DEFAULT_TIMEOUT,
        retry_deadline: float = DEFAULT_RETRY_DEADLINE,
        owns_connection: bool = False,
    ) -> None:
        super().__init__(nc, timeout=timeout, owns_connection=owns_connection)
        self._api = ApiSubjects(api_prefix)
        self.retry_deadline = retry_deadline
        self._account_info: AccountInfo | None = None
        self.skipped_messages = 0
        """Messages this context's readers (watches, listings, consumers) skipped because
        their subject is not UTF-8; each was also reported once, naming its stream sequence."""

    @property
    def api(self) -> ApiSubjects:
        """The API subjects this context uses."""
        return self._api

    def __repr__(self) -> str:
        url = self._nc.connected_url
        where = f"{url.hostname}:{url.port}" if url is not None else "not connected"
        return f"<{type(self).__name__} {where} api={self._api.prefix!r}>"

    async def request(
        self, subject: str, payload: bytes, response_type: type[T], *, idempotent: bool = False
    ) -> T:
        """A JSON API request decoded as ``response_type``, retried while JetStream has no
        leader (503); an ``idempotent`` one also after a timeout (asking again cannot change
        anything).

        Raises:
            JetStreamError: the registered error the server answered (e.g.
                StreamNotFoundError), or a reply that does not decode.
            NoRespondersError, UnavailableError, RequestTimeoutError: still so when the retry
                deadline passed (the error says what each attempt got).
            PermissionDeniedError, ConnectionClosedError, WrongEventLoopError, WrongTypeError,
                ClientValidationError: as :meth:`send` (a bad subject or payload: nothing is
                sent).
        """
        return await failover(
            self,
            lambda: self._decoded(subject, payload, response_type),
            still_there=_always,
            retry_timeouts=idempotent,
            what=subject,
        )

    async def _decoded(self, subject: str, payload: bytes, response_type: type[T]) -> T:
        msg = await self.send(subject, payload)
        return decode_reply(msg.data, response_type, subject=subject)

    async def stream_missing(self, name: str) -> bool:
        """Whether one stream info request (never retried) says stream ``name`` does not
        exist: how a 503 on a stream's subject is told apart from a leader election. False
        whenever the answer is not a definite "not found" (the stream exists, no reply, no
        responders while the meta leader is elected, no permission to look).

        Raises:
            ConnectionClosedError, WrongEventLoopError: as :meth:`ensure_open` (nothing else).
        """
        self.ensure_open()
        try:
            await self._decoded(self._api.stream_info(name), b"", StreamInfo)
        except StreamNotFoundError:
            return True
        except JetStreamError:
            return False
        return False

    # -- account and capabilities -------------------------------------------------------------

    async def account_info(self) -> AccountInfo:
        """Fetch account info, including the server's JetStream API level.

        Raises:
            JetStreamError: e.g. JetStream not enabled (10039/10076) or no responders.
        """
        info = await self.request(self._api.info(), b"", AccountInfo, idempotent=True)
        self._account_info = info
        return info

    async def api_level(self) -> int:
        """The server's JetStream API level, fetched once per context and cached.

        Raises:
            JetStreamError: as :meth:`account_info`.
        """
        if self._account_info is None:
            await self.account_info()
        assert self._account_info is not None
        return self._account_info.api.level

    async def supports(self, feature: Feature) -> bool:
        """Whether the server's API level provides ``feature``.

        Raises:
            JetStreamError: as :meth:`account_info`.
        """
        return await self.api_level() >= feature.api_level

    async def require(self, feature: Feature) -> None:
        """Raise unless the server provides ``feature``.

        Raises:
            UnsupportedServerFeatureError: the server's API level is too low; names the feature.
        """
        level = await self.api_level()
        if level < feature.api_level:
            raise UnsupportedServerFeatureError(
                feature=feature.label, required_level=feature.api_level, server_level=level
            )


async def failover(
    client: ApiClient,
    attempt: Callable[[], Awaitable[T]],
    *,
    still_there: Callable[[], Awaitable[bool]],
    retry_timeouts: bool = False,
    what: str = "",
) -> T:
    """Run ``attempt``; on a 503 (no responders) keep retrying with backoff until
    ``retry_deadline`` while ``still_there()`` says the target exists: a 503 then means a
    leader election, not a missing stream. JetStream's own "temporarily unavailable"
    answers (:class:`UnavailableError`) are retried the same way. Only these are retried
    for writes: nothing was stored, so a retry cannot apply a write twice.

    Each retry is logged at debug level; when retries run out, the error says how long it
    waited in all and what each attempt got (``what`` names the request)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + client.retry_deadline
    delay = 0.05
    tries = Tries(what)
    while True:
        client.ensure_open()  # closed meanwhile (a caller's own connection stays open)
        try:
            return await attempt()
        except NoRespondersError as exc:
            tries.note(exc)
            if loop.time() >= deadline or not await probe(still_there):
                tries.explain(exc, loop.time() - started)
                raise
        except UnavailableError as exc:
            tries.note(exc)
            if loop.time() >= deadline:
                tries.explain(exc, loop.time() - started)
                raise
        except RequestTimeoutError as exc:
            tries.note(exc)
            if not retry_timeouts or loop.time() >= deadline:
                tries.explain(exc, loop.time() - started)
                raise
        pause = min(delay, max(0.0, deadline - loop.time()))
        _log.debug(
            "%s: attempt %d failed (%s), retrying in %.2fs", what, len(tries), tries.last, pause
        )
        await asyncio.sleep(pause)
        delay = min(delay * 2, 1.0)
