"""MissingStream: the one place where a handle's operations learn that its stream is gone.

A KV bucket or an object store is a handle on one stream. Once someone deletes that stream,
its operations get one of two answers: 10059 "stream not found" from an API request (a
consumer create, a stream info, a purge), or a 503 no responders on a subject of the stream
(a publish, a direct get). On a clustered stream a 503 is also what a leader election
answers, and JetStream's retries wait that out; a 503 that reaches a handle is therefore
confirmed by one stream info request before it is called a missing stream. Either answer
becomes the handle's own error (``BucketNotFoundError``, ``StoreNotFoundError``) naming it;
every other error passes unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

from .._errors import CommitUnknownError, NoRespondersError, StreamNotFoundError
from .client import ApiClient

__all__ = ["MissingStream"]

_MAYBE_GONE = NoRespondersError | CommitUnknownError
"""What a deleted stream answers, but not only it: a 503 (also an election), and a write whose
outcome could not be learned (its stream gone, or silent past the deadline)."""


class MissingStream:
    """How a handle on ``stream`` says that the stream is gone: ``error()`` builds its own
    :class:`StreamNotFoundError` subclass naming it (``BucketNotFoundError`` of the
    bucket's name).

    Use it around an operation (``async with missing: ...``; in an async generator, around
    its loop): a plain :class:`StreamNotFoundError` becomes ``error()``, and so do a
    :class:`NoRespondersError` and a :class:`CommitUnknownError` (a write in doubt whose
    stream went away: whatever it stored went with it) once one stream info request says the
    stream does not exist (an election, a paused server or a missing permission leave them as
    they were; a context closed meanwhile makes it :class:`ConnectionClosedError`). Subclasses of
    :class:`StreamNotFoundError` are some handle's own error already (an object store link
    into another store) and pass unchanged. Stateless: one instance serves any number of
    concurrent operations. Until an error passes it costs two empty awaits (under 1 us).
    """

    __slots__ = ("_error", "_js", "_stream")

    def __init__(
        self, js: ApiClient, stream: str, error: Callable[[], StreamNotFoundError]
    ) -> None:
        self._js = js
        self._stream = stream
        self._error = error

    def error(self) -> StreamNotFoundError:
        """The handle's not-found error, for a caller that learned otherwise that the stream
        is gone."""
        return self._error()

    async def explained(self, error: BaseException) -> BaseException:
        """``error``, or the handle's not-found error when ``error`` says the stream is gone.

        Raises:
            ConnectionClosedError, WrongEventLoopError: a 503 could not be checked (see
                :meth:`JetStream.stream_missing`).
        """
        if type(error) is StreamNotFoundError:
            return self._error()
        if isinstance(error, _MAYBE_GONE) and await self._js.stream_missing(self._stream):
            return self._error()
        return error

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, StreamNotFoundError | _MAYBE_GONE):
            explained = await self.explained(exc)
            if explained is not exc:
                raise explained from exc
