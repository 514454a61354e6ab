"""The blocking client's engine: an event loop on a thread of its own, and the two ways
synchronous code crosses into it (a call that returns, an iterator that yields).

Every blocking handle (``jetstream.sync.JetStream`` and the buckets, stores and groups made
from it) keeps its async twin in this loop and only ever touches it there, so one handle can
be shared by any number of threads, and used from inside another running event loop (a
notebook cell) without "loop already running" and without a deadlock: the caller's thread
only waits.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Any, Final, Generic, Self, TypeVar

from .._errors import ConnectionClosedError, UsedAfterForkError, WrongEventLoopError

__all__ = ["BlockingIterator", "Portal", "ReadAheadIterator"]

T = TypeVar("T")

_CANCEL_GRACE: Final = 5.0
"""Seconds a call interrupted by Ctrl-C waits for its operation to end on the loop (a cancel
lands at the operation's next ``await``) before ``KeyboardInterrupt`` is raised anyway."""

_CLOSE_GRACE: Final = 10.0
"""Seconds :meth:`Portal.close` waits for the loop's thread to end."""


class Portal:
    """An event loop running on a daemon thread of its own, for synchronous callers.

    ``call(awaitable)`` runs the awaitable on the loop and blocks the calling thread until it
    ends, with its result or its exception. Any thread may call, several at once. Ctrl-C
    (``KeyboardInterrupt``) in a waiting thread cancels the operation on the loop, waits
    briefly for it to end, and is raised. After ``os.fork()`` the child's copy refuses every
    call (the thread was not copied): :class:`UsedAfterForkError`.
    """

    def __init__(self, name: str = "jetstream-sync") -> None:
        self._loop = asyncio.new_event_loop()
        self._pid = os.getpid()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the handles live in (for ``asyncio.run_coroutine_threadsafe``)."""
        return self._loop

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def call(self, awaitable: Awaitable[T], *, cancel_on_interrupt: bool = True) -> T:
        """Run ``awaitable`` on the loop and return its result. ``cancel_on_interrupt=False``
        is for clean-ups (a lock's release): Ctrl-C lets the operation run on, waits briefly
        for it to end, and is raised.

        Raises:
            ConnectionClosedError: the portal is closed (also to calls still waiting when it
                closes).
            UsedAfterForkError: this process is a fork of the one that opened the portal.
            WrongEventLoopError: called from the portal's own thread (from a callback running
                on its loop), where waiting would deadlock: await the async API there.
            KeyboardInterrupt: Ctrl-C while waiting; the operation was cancelled (unless
                ``cancel_on_interrupt=False``).
            Whatever the awaitable raises, unchanged.
        """
        try:
            self.check_usable()
        except BaseException:
            _close_unawaited(awaitable)
            raise
        if threading.get_ident() == self._thread.ident:
            _close_unawaited(awaitable)
            raise WrongEventLoopError(
                "a blocking call from the blocking client's own event loop would wait for "
                "itself: inside a callback, await the async API (handle.aio) instead"
            )
        # A lock as the latch the caller waits on: the cheapest wake-up between two threads
        # (a concurrent.futures.Future costs a condition and its waiter list on top).
        done = threading.Lock()
        done.acquire()
        ended: list[asyncio.Future[T] | None] = []  # the task, or None: never started
        started: list[asyncio.Future[T]] = []

        def finish(task: asyncio.Future[T] | None) -> None:
            ended.append(task)
            done.release()

        def start() -> None:
            if self._closed:  # close() came first: the loop will not run the task
                _close_unawaited(awaitable)
                finish(None)
                return
            task = asyncio.ensure_future(awaitable, loop=self._loop)
            started.append(task)
            task.add_done_callback(finish)

        def schedule() -> None:
            try:
                self._loop.call_soon_threadsafe(start)
            except RuntimeError:  # the loop closed between the check and here
                _close_unawaited(awaitable)
                raise _closed_error() from None

        def never_started() -> None:
            if not ended:
                finish(None)

        self._wait(schedule, done, started, ended, never_started, cancel_on_interrupt)
        return _outcome(ended[0])

    def _wait(
        self,
        schedule: Callable[[], None],
        done: threading.Lock,
        started: list[asyncio.Future[T]],
        ended: list[asyncio.Future[T] | None],
        never_started: Callable[[], None],
        cancel_on_interrupt: bool,
    ) -> None:
        try:
            schedule()
            done.acquire()
        except KeyboardInterrupt:  # also one that came while ``start`` was being scheduled
            if ended:  # it ended as Ctrl-C came (the latch may be taken already)
                raise
            if cancel_on_interrupt:
                self._cancel_and_wait(done, started, never_started)
            else:
                done.acquire(timeout=_CANCEL_GRACE)
            raise

    def _cancel_and_wait(
        self,
        done: threading.Lock,
        started: list[asyncio.Future[T]],
        never_started: Callable[[], None],
    ) -> None:
        """After Ctrl-C: cancel the call's operation and wait briefly for it to end."""

        def cancel() -> None:
            # ``start``, if scheduled at all, was scheduled first: the loop runs callbacks in
            # order, so the task exists by now unless it never will.
            if started:
                started[0].cancel()
            else:
                never_started()

        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            self._loop.call_soon_threadsafe(cancel)
        done.acquire(timeout=_CANCEL_GRACE)

    def submit(self, awaitable: Awaitable[Any]) -> None:
        """Start ``awaitable`` on the loop without waiting for it (a clean-up from a
        finalizer, which may run on any thread, this portal's own included). Does nothing
        once the portal is closed or in a forked child."""
        if self._closed or os.getpid() != self._pid:
            _close_unawaited(awaitable)
            return
        try:
            start = functools.partial(asyncio.ensure_future, awaitable, loop=self._loop)
            self._loop.call_soon_threadsafe(start)
        except RuntimeError:
            _close_unawaited(awaitable)

    def check_usable(self) -> None:
        """Raise unless calls can run.

        Raises:
            UsedAfterForkError: this process is a fork of the one that opened the portal.
            ConnectionClosedError: the portal is closed.
        """
        if os.getpid() != self._pid:
            raise UsedAfterForkError(
                f"this blocking handle was opened in process {self._pid}, before a fork: its "
                "connection and thread stayed there. Connect again in this process "
                "(jetstream.sync.connect), e.g. inside the Spark task or pool worker"
            )
        if self._closed:
            raise _closed_error()

    def close(self) -> None:
        """Stop the loop (operations still running are cancelled: their callers get
        :class:`ConnectionClosedError`) and end its thread. Idempotent; never raises."""
        if self._closed or os.getpid() != self._pid:
            self._closed = True
            return
        self._closed = True
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._loop.stop)
        if threading.get_ident() != self._thread.ident:
            self._thread.join(_CLOSE_GRACE)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._finish()

    def _finish(self) -> None:
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        with contextlib.suppress(BaseException):
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        self._loop.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running"
        return f"<Portal {self._thread.name} {state}>"


class _LeavableIterator(Generic[T]):
    """What both blocking iterators share: leaving one early (``close()``, the end of its
    ``with`` block, garbage collection) ends what it runs on the loop."""

    def __init__(
        self,
        portal: Portal,
        source: AsyncIterator[Any],
        stop: Callable[[], Awaitable[None]] | None,
    ) -> None:
        self._portal = portal
        self._source = source
        self._stop = stop if stop is not None else _closer(source)
        self._done = False

    def _ending(self) -> Awaitable[None] | None:
        """What ends the async side (None: nothing to end)."""
        return None if self._stop is None else self._stop()

    def __iter__(self) -> Self:
        return self

    def close(self) -> None:
        """End the async iterator (and what it holds open on the server). Idempotent."""
        if self._done:
            return
        self._done = True
        if not self._portal.closed and (ending := self._ending()) is not None:
            with contextlib.suppress(Exception):
                self._portal.call(ending)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        if not self._done:
            self._done = True
            if (ending := self._ending()) is not None:
                self._portal.submit(ending)


class BlockingIterator(_LeavableIterator[T]):
    """A plain iterator over an async iterator that lives in a :class:`Portal`'s loop
    (``convert`` turns each item into its blocking twin, a message into one whose ``ack()``
    blocks).

    Each ``next()`` is one blocking call. Leaving early ends the async iterator (its watch,
    listing or consume stops): ``close()``, the ``with`` block's end, or the iterator being
    garbage collected. Ctrl-C during ``next()`` ends it too.
    """

    def __init__(
        self,
        portal: Portal,
        source: AsyncIterator[Any],
        *,
        stop: Callable[[], Awaitable[None]] | None = None,
        convert: Callable[[Any], T] | None = None,
    ) -> None:
        super().__init__(portal, source, stop)
        self._convert = convert

    def __next__(self) -> T:
        """The next item.

        Raises:
            StopIteration: the async iterator ended (or this one was closed).
            KeyboardInterrupt: Ctrl-C while waiting; the iterator is closed.
            Whatever the async iterator raises, unchanged (the iterator is then closed).
        """
        if self._done:
            raise StopIteration
        try:
            item = self._portal.call(_next(self._source))
        except StopAsyncIteration:
            self._done = True
            raise StopIteration from None
        except BaseException:
            self.close()
            raise
        return item if self._convert is None else self._convert(item)


def _closer(source: AsyncIterator[Any]) -> Callable[[], Awaitable[None]] | None:
    aclose = getattr(source, "aclose", None)
    return aclose if callable(aclose) else None


async def _next(source: AsyncIterator[T]) -> T:
    return await anext(source)


def _outcome(task: asyncio.Future[T] | None) -> T:
    """The task's result, raised error, or (cancelled by close(), or never started) the
    closed handle's error."""
    if task is None or task.cancelled():
        raise _closed_error()
    return task.result()


def _closed_error() -> ConnectionClosedError:
    return ConnectionClosedError("the blocking client is closed")


def _close_unawaited(awaitable: Awaitable[Any]) -> None:
    """Close a coroutine that will never run (no "was never awaited" warning)."""
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()


class _Buffer:
    """Items the loop read ahead, shared by the loop's reading task and the caller's thread
    (not the iterator itself: a task referring to the iterator would keep it alive, and an
    iterator dropped early would never be collected and stopped)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: collections.deque[Any] = collections.deque()
        self.ready = threading.Condition(threading.Lock())
        self.ended: BaseException | None = None  # StopAsyncIteration, or the source's error
        self.room = asyncio.Event()
        self.waiting_for_room = False

    async def fill(self, source: AsyncIterator[Any]) -> None:
        ended: BaseException = StopAsyncIteration()
        try:
            async for item in source:
                with self.ready:
                    self.items.append(item)
                    self.ready.notify()
                    full = len(self.items) >= self.size
                    if full:
                        self.room.clear()
                        self.waiting_for_room = True
                if full:
                    await self.room.wait()
        except asyncio.CancelledError:
            ended = _closed_error()
            raise
        except Exception as exc:
            ended = exc
        finally:
            with self.ready:
                self.ended = ended
                self.ready.notify()

    def take(self, loop: asyncio.AbstractEventLoop) -> tuple[bool, Any]:
        """(True, the next item), or (False, None) once the source ended; waits for one."""
        with self.ready:
            while not self.items and self.ended is None:
                self.ready.wait()
            if not self.items:
                return False, None
            item = self.items.popleft()
            if self.waiting_for_room and len(self.items) <= self.size // 2:
                self.waiting_for_room = False  # wake the reader once half was taken
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(self.room.set)
            return True, item


class ReadAheadIterator(_LeavableIterator[T]):
    """A plain iterator over an async iterator that the loop reads ahead of the caller, up to
    ``read_ahead`` items, so that each ``next()`` is a hand-over through a thread-safe buffer
    rather than a round trip to the loop: watches, listings and scans deliver as many items
    per second as the async API. Only for sources whose items do not age while buffered (a
    consumer's messages, whose ack timers run, use :class:`BlockingIterator`). Leaving
    early, Ctrl-C and errors behave as there; an error of the source is raised after the
    items read before it.
    """

    def __init__(
        self,
        portal: Portal,
        source: AsyncIterator[Any],
        *,
        stop: Callable[[], Awaitable[None]] | None = None,
        read_ahead: int = 256,
    ) -> None:
        super().__init__(portal, source, stop)
        self._buffer = _Buffer(read_ahead)
        self._reading: asyncio.Task[None] | None = None

    def __next__(self) -> T:
        """The next item.

        Raises:
            StopIteration: the async iterator ended (or this one was closed).
            KeyboardInterrupt: Ctrl-C while waiting; the iterator is closed.
            Whatever the async iterator raised, after the items read before it.
        """
        if self._done:
            raise StopIteration
        try:
            if self._reading is None:
                self._reading = self._portal.call(self._start())
            found, item = self._buffer.take(self._portal.loop)
        except BaseException:
            self.close()
            raise
        if found:
            return item  # type: ignore[no-any-return]
        self.close()
        ended = self._buffer.ended
        if isinstance(ended, StopAsyncIteration) or ended is None:
            raise StopIteration
        raise ended

    async def _start(self) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(self._buffer.fill(self._source))

    def _ending(self) -> Awaitable[None]:
        return _shut(self._reading, self._stop)  # the reader first, then the source


async def _shut(
    reading: asyncio.Task[None] | None, stop: Callable[[], Awaitable[None]] | None
) -> None:
    if reading is not None and not reading.done():
        reading.cancel()
        await asyncio.wait([reading])
    if stop is not None:
        await stop()
