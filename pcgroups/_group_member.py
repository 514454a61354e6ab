"""A running member of a partitioned consumer group (static or elastic, see ``_consume``).

Two tasks: the *watch* follows the group's config key and computes the member's consumer
config (None = owns nothing); the *supervisor* makes the consumer match it and consumes
with our ADR-37 ``consume(group="PCG")``, one message at a time, taking the next one only
when the handler (or the iterating caller) wants it; what the server sent meanwhile is kept
alive in the buffer (``keep_buffered``), so it never times out there and runs twice.

On a change of the member's partitions the supervisor takes no more messages and waits
until those in progress are settled (a running handler returned, iterated messages acked,
nak'ed or termed), each for as long as its ``ack_wait`` allows from its delivery or its last
``in_progress()``; meanwhile the consume goes on pulling, so the member keeps its pin and no
other instance of it gets their keys. Only then does it let the old consumer go (deleted by
the instance holding the pin, as orbit does). On a work-queue stream the server refuses a
consumer whose filters overlap another's (10100), so the member taking over a partition
cannot receive its messages before the previous owner has finished: no two members work on
one key at once.

Ending is bounded. Once the member stops (``stop()``, the group deleted, an error), a step of
following the config that waits for the server (joining, handing over) is cut short at once;
a running handler finishes first as above, while the server answers pings; then leaving (the
consume's wind-down with its naks, the pin's release, the config watch's consumer) gets
twice the request timeout in all: what is not done by then the server does by itself
(unacknowledged messages come back after ``ack_wait``, the pin lapses after
``priority_timeout``). A server that does not answer, or a cancelled ``stop()``, ends the
member at once (the handler is cancelled): within twice the request timeout. Every task a
member starts has ended when it has. A member whose tasks are cancelled directly (an event
loop shutting down while it runs) ends at once without leaving, as if its process had died.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self, TypeVar

from jetstream import (
    ClientValidationError,
    ConnectionClosedError,
    Consumer,
    ConsumerConfig,
    JetStream,
    JetStreamError,
    StreamNotFoundError,
)
from jetstream._consume.message_stream import MessageStream
from jetstream._consume.pull_message import PullMessage
from jetstream._consume.queue import cancel_and_wait
from jetstream._transport.connection import answers
from kvstore import Op

from ._acked import AckedMessages
from ._assign import PRIORITY_GROUP, config_key
from ._errors import (
    GroupConfigChangedError,
    GroupConfigMismatchError,
    GroupDeletedError,
    MemberNotFoundError,
)
from ._handover import hand_over, holds_pin
from ._join import MemberJoin
from ._message import GroupMessage
from ._status import partitioning_mismatch, unjoinable_members
from ._store import existing_bucket, read_config

if TYPE_CHECKING:
    from ._kind import GroupKind

__all__ = ["GroupMember", "Handler"]

Handler = Callable[[GroupMessage], Awaitable[None] | None]
T = TypeVar("T")
_log = logging.getLogger("pcgroups")
_JOIN_RETRY: Final = (0.25, 0.5)  # a join refused (10100: the previous owner of a partition
# has not let it go yet) is retried after this long (orbit: ack_wait + 500 ms)
_REJOIN_DELAY: Final = 0.2  # after a consume ended (consumer deleted): retry soon
_LEAVE_TIMEOUTS: Final = 2  # leaving takes at most this many request timeouts (js.timeout)


class GroupMember:
    """A member consuming its partitions of a group; from :func:`consume_static` /
    :func:`consume_elastic`.

    ``async with`` starts it (and stops it on exit, also when the block is cancelled). With a
    handler it runs by itself; without one, iterate it for :class:`GroupMessage` objects.
    ``stop()`` lets a running handler finish, then ends it (releasing the pin so another
    instance of the member takes over at once); ``done()`` waits for the end and raises what
    ended it (:class:`GroupDeletedError`, :class:`GroupConfigChangedError`,
    ``ConnectionClosedError`` ...).
    """

    def __init__(
        self, js: JetStream, kind: GroupKind, handler: Handler | None, *, confirm_acks: bool
    ) -> None:
        self._js = js
        self._kind = kind
        self._handler = handler
        self._confirm_acks = confirm_acks
        self._acked = AckedMessages()  # delivered again after a server crash: not handled
        self._first: Any = None
        self._desired: ConsumerConfig | None = None
        self._changed = asyncio.Event()
        self._stopping = False
        self._error: BaseException | None = None
        self._queue: asyncio.Queue[GroupMessage | None] = asyncio.Queue(maxsize=1)
        self._wanted = asyncio.Event()  # the iterator waits for a message
        self._unsettled: set[GroupMessage] = set()  # in progress (see _begin)
        self._all_settled = asyncio.Event()
        self._all_settled.set()
        self._abandoned: list[PullMessage] = []  # their handler was cancelled: nak'ed first
        self._consumer: Consumer | None = None
        self._stream: MessageStream | None = None  # the consume running now
        self._pump: asyncio.Task[None] | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None  # the supervisor
        self._tasks: set[asyncio.Task[Any]] = set()  # every other task of the member
        self._leave_by: float | None = None  # loop time by which leaving ends, once stopping
        self._hurried = False  # leaving was cut short: nothing more waits
        self._impatient = asyncio.Event()  # stopping, a running handler is not waited for
        self._finishing = False  # the messages in progress are being waited for
        self._deadline: asyncio.Timeout | None = None  # the supervisor's, while it runs
        self._interrupt: asyncio.Timeout | None = None  # of a step stopping cuts short
        self._iter_done = False
        self._draining = False
        self._held: list[PullMessage] = []  # received while winding down: nak'ed after
        self._last: PullMessage | None = None  # the last message of the current consumer
        self._joining = MemberJoin(js, kind)
        self._started = False

    @property
    def member(self) -> str:
        """The member name."""
        return self._kind.member

    @property
    def partitions(self) -> tuple[int, ...]:
        """The partitions this member owns under the config it follows now."""
        if self._desired is None or not self._desired.filter_subjects:
            return ()
        return tuple(sorted({int(f.split(".", 1)[0]) for f in self._desired.filter_subjects}))

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> Self:
        """Read the config, then start watching it and consuming.

        Raises:
            GroupNotFoundError: no such group.
            MemberNotFoundError: (static) the member is not in the group.
            CorruptGroupConfigError: the stored config is unreadable.
            InvalidGroupConfigError: the config gives this member filters the server refuses
                (more than ``MAX_MEMBER_FILTERS``, one covering another).
            GroupConfigMismatchError: the config's ``max_members`` (elastic: or partitioning
                filters) disagree with how the stream splits messages into partitions.
            ClientValidationError: the member was started before.
        """
        if self._started:
            raise ClientValidationError(f"group member {self.member} was started before")
        self._started = True
        kind = self._kind
        bucket = await existing_bucket(self._js, kind.bucket)
        data, revision = await read_config(bucket, kind.stream, kind.group, kind.kind)
        assert bucket is not None  # read_config raised otherwise
        self._first = kind.decode(data)
        if not kind.elastic and not _is_member(self._first, kind.member):
            raise MemberNotFoundError(kind.stream, kind.group, kind.member)
        self._desired = kind.consumer_config(self._first)  # the config's own rules first
        await self._check_partitioning()
        watcher = bucket.watch(config_key(kind.stream, kind.group), resume_from=revision + 1)
        self._watch_task = self._spawn(self._watch(watcher))
        self._task = asyncio.create_task(self._supervise())
        return self

    async def _check_partitioning(self) -> None:
        """Refuse a config that strands messages by its partitioning; warn about members
        that can never join (their partitions are never processed)."""
        kind = self._kind
        mismatch = await partitioning_mismatch(self._js, kind.stream, kind.group, self._first)
        if mismatch is not None:
            raise GroupConfigMismatchError(kind.stream, kind.group, kind.kind, mismatch)
        for name, partitions in unjoinable_members(self._first, kind.group).items():
            _log.warning(
                "group %s on %s: member %r cannot join (not a valid consumer name): its "
                "partitions %s are not processed",
                kind.group,
                kind.stream,
                name,
                list(partitions),
            )

    def _spawn(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """A task of the member: ``_finish`` ends it at the latest. What it raises is taken
        here (a task whose end nobody reads would be reported as lost)."""
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._task_ended)
        return task

    def _task_ended(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.debug("group member %s: %r ended: %r", self.member, task, task.exception())

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Stop consuming and end. A running handler finishes first, as long as its message's
        ``ack_wait`` lasts from its delivery or its last ``in_progress()`` and the server
        answers (no other instance of the member gets its keys meanwhile); then what was
        received but not handled is nak'ed and the pin released, within twice the request
        timeout. Messages handed to an iterating caller are not waited for: settle them
        first. Returns once every task of the member has ended; cancelled meanwhile, or when
        the server does not answer, it cuts all that short (the handler is cancelled; the
        server finishes it: the pin lapses, unacknowledged messages come back after
        ``ack_wait``) and still waits for that. Called by a task that is being cancelled (the
        exit of an ``async with`` block that was cancelled, or timed out), it does not wait
        for the handler: it is cancelled, its message nak'ed. Safe to call from a handler and
        more than once."""
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            self._impatient.set()
        self._end(None)
        task = self._task
        if task is None or self._pump is asyncio.current_task() or task is asyncio.current_task():
            return
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            self._hurry()
            await asyncio.wait({task})
            raise

    async def done(self) -> None:
        """Wait until the member has ended.

        Raises:
            GroupDeletedError, GroupConfigChangedError, JetStreamError: what ended it (nothing
                when it was stopped).
        """
        if self._task is not None:
            await asyncio.wait({self._task})
        if self._error is not None:
            raise self._error

    def _end(self, error: BaseException | None) -> None:
        """Start stopping (``error``: what ended the member, if it was not stopped): a step
        waiting for the server is cut short now, leaving gets its deadline."""
        if error is not None and self._error is None and not self._stopping:
            self._error = error
        if self._stopping:
            return
        self._stopping = True
        self._changed.set()
        now = asyncio.get_running_loop().time()
        if not self._finishing:  # else leaving's time starts once they have finished
            self._start_leaving(now)
        if self._interrupt is not None:
            self._interrupt.reschedule(now)

    def _start_leaving(self, now: float) -> None:
        """Leaving gets its time from ``now`` on (not after a hurry)."""
        if not self._hurried:
            self._leave_by = now + _LEAVE_TIMEOUTS * self._js.timeout
            self._set_deadline()

    def _hurry(self) -> None:
        """Leave now: a running handler is cancelled, what leaving has not done yet is left
        to the server."""
        self._hurried = True
        self._leave_by = asyncio.get_running_loop().time()
        self._set_deadline()

    def _set_deadline(self) -> None:
        if self._deadline is not None and not self._deadline.expired():
            self._deadline.reschedule(self._leave_by)

    # -- iteration ----------------------------------------------------------------------------

    def __aiter__(self) -> Self:
        if self._handler is not None:
            raise ClientValidationError("this member has a handler: it cannot be iterated")
        return self

    async def __anext__(self) -> GroupMessage:
        if self._iter_done:
            raise StopAsyncIteration
        if not self._started:  # nothing would ever hand it a message
            raise ClientValidationError(
                f"group member {self.member} is not started: use it with `async with` first"
            )
        if self._queue.empty():
            self._wanted.set()  # the supervisor takes the next message only now
        try:
            item = await self._queue.get()
        except asyncio.CancelledError:
            self._wanted.clear()
            raise
        if item is None:
            self._iter_done = True
            if self._error is not None:
                raise self._error
            raise StopAsyncIteration
        return item

    # -- the config watch ---------------------------------------------------------------------

    async def _watch(self, watcher: Any) -> None:
        kind = self._kind
        try:
            async with watcher:
                async for entry in watcher:
                    if entry.op is not Op.PUT:
                        raise GroupDeletedError(kind.stream, kind.group, kind.kind)
                    config = kind.decode(entry.value)
                    what = kind.incompatible(self._first, config)
                    if what is not None:
                        raise GroupConfigChangedError(kind.stream, kind.group, kind.kind, what)
                    desired = kind.consumer_config(config)
                    if desired != self._desired:
                        self._desired = desired
                        self._changed.set()
        except StreamNotFoundError:  # the whole config bucket was deleted, with the group
            self._end(GroupDeletedError(kind.stream, kind.group, kind.kind))
        except JetStreamError as exc:
            self._end(exc)

    # -- the supervisor -----------------------------------------------------------------------

    async def _supervise(self) -> None:
        """The member's life: follow the config until stopping, leave by the deadline, then
        end everything it started. Cancelled directly, it skips leaving."""
        try:
            async with asyncio.timeout_at(self._leave_by) as deadline:
                self._deadline = deadline
                await self._follow()
                await self._leave()
        except TimeoutError:
            _log.debug("group member %s: leaving cut short, the server ends it", self.member)
        finally:
            self._deadline = None
            await self._finish()

    async def _follow(self) -> None:
        """Follow the config until stopping; an error ends the member with it."""
        try:
            await self._follow_config()
        except JetStreamError as exc:
            self._end(exc)
        except Exception as exc:  # a bug: end with an error of ours rather than hang iterators
            _log.exception("group member %s failed", self.member)
            self._end(JetStreamError(f"group member {self.member} failed: {exc!r}"))

    async def _follow_config(self) -> None:
        while not self._stopping:
            self._changed.clear()
            desired = self._desired
            if desired is None:
                await self._changed.wait()
                continue
            consumer = await self._unless_stopping(functools.partial(self._join, desired))
            if consumer is None:
                await self._wait_change(random.uniform(*_JOIN_RETRY))
                continue
            ended = await self._session(consumer)
            if self._stopping:
                return
            if ended:  # the consumer went away (deleted, timed out): join again
                await self._wait_change(_REJOIN_DELAY)
            else:
                await self._unless_stopping(functools.partial(self._hand_over, consumer))

    async def _unless_stopping(self, step: Callable[[], Awaitable[T]]) -> T | None:
        """``step()`` (joining, settling, handing over: it waits for the server or for
        ``ack_wait``), cut short at once when the member starts stopping (None then)."""
        if self._stopping:
            return None
        try:
            async with asyncio.timeout(None) as cut:
                self._interrupt = cut
                try:
                    return await step()
                finally:
                    self._interrupt = None
        except TimeoutError:
            if not cut.expired():
                raise  # the step's own (RequestTimeoutError is a TimeoutError too)
        return None

    async def _wait_change(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), seconds)

    async def _join(self, desired: ConsumerConfig) -> Consumer | None:
        """Create (or take over) the member's consumer; None when it cannot be now (retried
        later). See ``_join``.

        Raises:
            ConnectionClosedError, ClientValidationError, MemberConsumerRefusedError: as
                :meth:`MemberJoin.join` (they end the member).
        """
        pin = "" if self._consumer is None else self._consumer.pin_id(PRIORITY_GROUP)
        consumer = await self._joining.join(desired, pin)
        if consumer is not None:
            self._consumer = consumer
        return consumer

    async def _session(self, consumer: Consumer) -> bool:
        """Consume until the desired config changes or the member stops (False), or the
        consume ends by itself (True: the consumer is gone). Cut short (the leaving deadline,
        a direct cancel), ``_finish`` stops what it left running.

        Raises:
            ConnectionClosedError: the connection closed.
        """
        self._last = None
        stream = await consumer.consume(
            group=PRIORITY_GROUP, expires=self._kind.pull_expires, keep_buffered=True
        )
        self._stream = stream
        pump = self._pump = self._spawn(self._run_pump(stream))
        changed = self._spawn(self._changed.wait())
        await asyncio.wait({pump, changed}, return_when=asyncio.FIRST_COMPLETED)
        changed.cancel()
        await self._wind_down(stream, pump)
        self._stream = self._pump = None
        error = None if pump.cancelled() else pump.exception()
        if isinstance(error, ConnectionClosedError):
            raise error
        if error is not None:
            _log.debug("member %s: consume ended: %r", self._kind.member, error)
            return True
        return not self._changed.is_set()

    async def _wind_down(self, stream: MessageStream, pump: asyncio.Task[None]) -> None:
        """Take no more messages; let those in progress finish (:meth:`_let_finish`); then
        stop pulling. What was received but not handled is nak'ed in order once the pulls are
        gone (after a message whose handler was cancelled), so whoever gets the partition next
        receives it at once and before newer messages (dropped, it would come back only after
        ``ack_wait``, behind them; nak'ed while a pull of ours still waited, the server would
        hand it straight back to that pull)."""
        self._draining = True
        self._held = []
        try:
            if self._handler is None or not self._unsettled:
                await cancel_and_wait(pump)  # it waits for a message (or to be asked for one)
            await self._let_finish(pump)
            self._held.extend(m.raw for m in self._take_queued())  # the oldest
            rest = self._spawn(self._hold_rest(stream))
            drain = self._spawn(stream.drain())  # unsubscribes
            _, pending = await asyncio.wait({drain, rest}, timeout=self._js.timeout)
            if pending:  # the server did not answer the drain: give up on the rest
                await stream.stop()
                for task in pending:
                    task.cancel()
                await asyncio.wait(pending)
            if self._stopping:
                await self._nak_held()
            # on a hand over the consumer is deleted: the work queue gives them out again
        finally:
            self._draining = False
            self._abandoned = []

    async def _let_finish(self, pump: asyncio.Task[None]) -> None:
        """Wait until the messages in progress are settled: a running handler returned, the
        messages handed to the iterator acked, nak'ed or termed (when stopping, those are
        not waited for: the caller stopped, it settles them itself). The consume goes on
        pulling meanwhile: the pin stays (another instance of the member would otherwise
        take the keys over) and the buffer is kept alive. Each message may take as long as
        its ``ack_wait`` allows from its delivery or its last ``in_progress()``; a handler
        that overruns it is cancelled. Stopping, this waits only while the server answers
        (otherwise the member hurries) and not for a stop from a task being cancelled; a
        hurry cuts it short; leaving's time starts once it is over."""
        self._finishing = True
        if self._deadline is not None and not self._hurried:
            self._deadline.reschedule(None)
        try:
            if self._unsettled and self._patient():
                await self._wait_in_progress()
        finally:
            self._finishing = False
            if self._stopping:
                self._start_leaving(asyncio.get_running_loop().time())
        if self._unsettled and not pump.done():  # a handler overran its message's ack_wait
            await cancel_and_wait(pump)
        await asyncio.wait({pump})
        self._unsettled.clear()  # overdue: the server gives them out again anyway
        self._all_settled.set()

    async def _wait_in_progress(self) -> None:
        loop = asyncio.get_running_loop()
        settled = self._spawn(self._all_settled.wait())
        impatient = self._spawn(self._impatient.wait())
        try:
            while self._unsettled and self._patient():
                left = self._overdue_at() - loop.time()
                if left <= 0:
                    return
                if self._stopping and not await answers(self._js.nc, self._js.timeout):
                    self._hurry()  # nobody to hand over to: leave now
                    return
                await asyncio.wait(
                    {settled, impatient},
                    timeout=min(left, self._js.timeout),
                    return_when=asyncio.FIRST_COMPLETED,
                )
        finally:
            settled.cancel()
            impatient.cancel()

    def _patient(self) -> bool:
        """Whether messages in progress are waited for: stopping, only a running handler,
        and not when the stop came from a task being cancelled."""
        return not self._stopping or (self._handler is not None and not self._impatient.is_set())

    def _overdue_at(self) -> float:
        """When the last of the messages in progress runs out of ``ack_wait``."""
        ack_wait = self._kind.ack_wait
        return max(m.raw.refreshed_at for m in self._unsettled) + ack_wait

    async def _hold_rest(self, stream: MessageStream) -> None:
        with contextlib.suppress(JetStreamError):
            async for msg in stream:
                self._last = msg
                self._held.append(msg)

    async def _nak_held(self) -> None:
        """Nak the held messages in order and wait until the server has processed them,
        before the pin is released: they are redelivered at once instead of after
        ``ack_wait``. (On 2.15.1 the first one or two of them were still seen to come back
        only after ``ack_wait``, behind newer ones: per-key order across a takeover needs
        ``max_ack_pending=1``.)"""
        held, self._held = [*self._abandoned, *self._held], []
        with contextlib.suppress(JetStreamError):  # unsent: redelivered after ack_wait
            for msg in held[:-1]:
                await msg.nak()
            if held:
                await held[-1].nak(wait=True)

    def _take_queued(self) -> list[GroupMessage]:
        """The messages not yet handed to the iterator, no longer counted as in flight."""
        taken = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not None:
                self._settled(item)
                taken.append(item)
        return taken

    async def _run_pump(self, stream: MessageStream) -> None:
        """Hand the stream's messages out one at a time: to the handler, or to the iterator
        when it asks for one (what is not taken stays in the stream's buffer, kept alive)."""
        if self._handler is None:
            await self._feed_iterator(stream)
            return
        async for msg in stream:
            self._last = msg
            if msg in self._acked:
                await self._ack_again(msg)
                continue
            # In progress until the handler returns, whatever it settled meanwhile.
            message = GroupMessage(msg, self._noted, confirm=self._confirm_acks)
            self._begin(message)
            try:
                result = self._handler(message)
                if inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                self._abandoned.append(msg)  # cut short: nak'ed if the member stops
                raise
            except Exception:  # the handler's problem: the message is redelivered later
                _log.exception("group member %s: handler failed", self._kind.member)
            finally:
                self._settled(message)
            if self._draining:
                return

    async def _feed_iterator(self, stream: MessageStream) -> None:
        end = self._spawn(self._wake_at_end(stream))  # done: the consume's end is on its way
        try:
            while True:
                await self._wanted.wait()
                if end.done():
                    break
                try:
                    msg = await anext(stream)
                except StopAsyncIteration:
                    return
                self._last = msg
                if msg in self._acked:
                    await self._ack_again(msg)
                    continue  # the caller still wants one
                self._wanted.clear()
                # In progress until settled.
                message = GroupMessage(msg, self._settled, confirm=self._confirm_acks)
                self._begin(message)
                self._queue.put_nowait(message)
        finally:
            end.cancel()
        async for _ in stream:  # the consumer is gone: what it sent cannot be acked any more
            pass  # until the terminal error (the session ends with it)

    async def _wake_at_end(self, stream: MessageStream) -> None:
        """A member nobody iterates must still notice its consumer is gone: the consume's
        end wakes the feed as a caller's want would (one waiter per consume, none per
        message)."""
        await stream.ending()
        self._wanted.set()

    def _begin(self, message: GroupMessage) -> None:
        self._unsettled.add(message)
        self._all_settled.clear()

    def _settled(self, message: GroupMessage, final: bool = False) -> None:
        """``message`` needs no more waiting for; ``final``: it was acked or terminated."""
        if final:
            self._acked.add(message.raw)
        self._unsettled.discard(message)
        if not self._unsettled:
            self._all_settled.set()

    def _noted(self, message: GroupMessage, final: bool) -> None:
        """A handler settled ``message`` (it stays in progress until the handler returns);
        ``final``: acked or terminated, remembered in case the server delivers it again."""
        if final:
            self._acked.add(message.raw)

    async def _ack_again(self, msg: PullMessage) -> None:
        """A message this member acknowledged came again: the server lost the ack (it
        crashed before applying it or before writing it to disk). Acknowledge it again
        instead of handling it twice."""
        _log.warning(
            "group member %s: the message at stream sequence %d came again after its ack "
            "(lost by the server); acknowledged again, not handled",
            self._kind.member,
            msg.metadata.stream_seq,
        )
        with contextlib.suppress(JetStreamError):  # unsent: it comes again, and again here
            await msg.ack(wait=self._confirm_acks)

    async def _hand_over(self, consumer: Consumer) -> None:
        last, self._last = self._last, None
        await hand_over(self._js, consumer, last)

    async def _leave(self) -> None:
        """Stopping: close the config watch (its task deletes its consumer meanwhile) and
        release the pin so another instance of the member takes over at once."""
        if self._watch_task is not None:
            self._watch_task.cancel()
        consumer = self._consumer
        if consumer is not None and await holds_pin(consumer):
            with contextlib.suppress(JetStreamError):
                await self._js.unpin_consumer(consumer.stream, consumer.name, PRIORITY_GROUP)

    async def _finish(self) -> None:
        """The end, however it came: the consume's pulls and every task of the member are
        gone (the config watch has closed its consumer), and the iterator ends."""
        self._stopping = True  # also when cancelled directly
        tasks = set(self._tasks)
        for task in tasks:
            if not task.cancelling():  # once: a second cancel would cut a watch's closing
                task.cancel()
        try:
            if self._stream is not None:
                await self._stream.stop()
            if tasks:
                await asyncio.wait(tasks)
        finally:
            self._stream = None
            self._take_queued()
            self._queue.put_nowait(None)


def _is_member(config: Any, member: str) -> bool:
    return member in config.members or any(m.member == member for m in config.member_mappings)
