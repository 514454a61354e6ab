"""Lease: one client's hold on a key, kept by the server's per-key TTL and renewed in the
background by compare-and-set; the fence a batch conditions its writes on.

The lease key holds a record ``<holder>\\n<value>``: ``holder`` is a fresh random id per
acquisition (so a record always says whose it is, even after an ambiguous write), ``value``
the caller's (an election's candidate value; empty for a lock).

Whether the lease is held is the server's to say: every write of the lease key after the
create is conditioned on the revision the holder wrote last, so one that succeeds proves
nobody else held the key in between. The client's monotonic clock only ever says "maybe
lost" (the TTL may have run out since the server accepted the last write); never "held".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Protocol, TypeVar

from nats.nuid import NUID

from jetstream import (
    NEVER,
    ConnectionClosedError,
    InvalidTTLError,
    JetStreamError,
    TTLValue,
    ValueTooLargeError,
)
from jetstream._protocol.ttl import parse_ttl

from ._errors import (
    BucketNotFoundError,
    KeyExistsError,
    KeyNotFoundError,
    LeaseLostError,
    WrongRevisionError,
)

if TYPE_CHECKING:
    from ._core import BucketCore
    from ._models import BucketConfig, Entry
    from ._watch import KeyWatcher

__all__ = [
    "MIN_LEASE_TTL",
    "Lease",
    "LeaseBucket",
    "check_lease_value",
    "checked_lease_ttl",
    "fencing",
    "finished",
    "holder_value",
    "lease_seconds",
]

_log = logging.getLogger("kvstore")


class LeaseBucket(Protocol):
    """The calls of :class:`kvstore.Bucket` that leases, locks and elections are made of (a
    protocol, so that they need not import the bucket that offers them)."""

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> BucketConfig: ...

    async def create(self, key: str, value: bytes, *, ttl: TTLValue | None = None) -> int: ...

    async def update(
        self, key: str, value: bytes, revision: int, *, ttl: TTLValue | None = None
    ) -> int: ...

    async def purge(
        self, key: str, *, ttl: TTLValue | None = None, revision: int | None = None
    ) -> int: ...

    async def get(self, key: str, *, revision: int | None = None) -> Entry: ...

    def watch(
        self, keys: str | list[str] = ">", *, updates_only: bool = False, meta_only: bool = False
    ) -> KeyWatcher: ...


T = TypeVar("T")

MIN_LEASE_TTL = 3
"""Seconds: a lease is renewed every third of its TTL, which leaves two thirds (at least 2 s)
for a renewal to reach the server, be retried, and land before the TTL runs out."""

_RENEWALS_PER_TTL = 3
_SAFE_FRACTION = 0.9
"""Of the TTL, counted from the send of the last write the server accepted: after that the
client calls the lease maybe lost. The server's TTL runs from when it stored the write, which
is later than the send, so this is conservative as long as the two clocks' rates differ by
less than 10 %."""
_RETRY = 0.25
"""Seconds between renewal attempts after one failed for want of an answer."""
_GIVE_BACK_TIMEOUT = 2.0
"""Seconds a best-effort release may take; the TTL frees the key otherwise."""


def checked_lease_ttl(core: BucketCore, ttl: TTLValue) -> int:
    """``ttl`` in whole seconds, if a lease on ``core``'s bucket can live on it.

    Raises:
        InvalidTTLError: not a TTL, ``"never"``, below :data:`MIN_LEASE_TTL` (named), below
            the bucket's ``marker_ttl`` where the server would stretch it, or above the
            bucket's ``max_age`` (which would remove the lease key before its TTL).
    """
    seconds = lease_seconds(core.checked_ttl(ttl))
    max_age = core.config.max_age
    if max_age is not None and seconds > max_age.total_seconds():
        raise InvalidTTLError(
            f"lease TTL of {seconds}s exceeds bucket {core.name!r}'s max_age ({max_age}): "
            "the server would remove the lease key first"
        )
    return seconds


def lease_seconds(ttl: TTLValue) -> int:
    """``ttl`` in whole seconds, if any lease can live on it (whatever the bucket).

    Raises:
        InvalidTTLError: not a TTL, ``"never"``, or below :data:`MIN_LEASE_TTL` (named).
    """
    seconds = parse_ttl(ttl)
    if seconds == NEVER:
        raise InvalidTTLError("a lease needs a TTL that runs out; 'never' would outlive a crash")
    if seconds < MIN_LEASE_TTL:
        raise InvalidTTLError(
            f"lease TTL of {seconds}s is too short: renewing every third of it needs at "
            f"least {MIN_LEASE_TTL}s"
        )
    return seconds


_HOLDER_LENGTH = 22  # a NUID


def _record(holder: str, value: bytes) -> bytes:
    return holder.encode() + b"\n" + value


def check_lease_value(value: bytes, max_value_size: int, bucket: str) -> None:
    """Refuse a lease value the bucket could not store with the holder id before it.

    Raises:
        ValueTooLargeError: ``value`` with the record's holder id exceeds ``max_value_size``.
    """
    room = max_value_size - _HOLDER_LENGTH - 1
    if max_value_size > 0 and len(value) > room:
        raise ValueTooLargeError(
            f"a lease value in bucket {bucket!r} may be at most {room} bytes (its "
            f"max_value_size {max_value_size}, less the holder id stored with it): "
            f"{len(value)} given"
        )


def holder_value(record: bytes) -> tuple[str, bytes] | None:
    """``(holder, value)`` of a lease record; None for a value that is not one."""
    holder, sep, value = record.partition(b"\n")
    if not sep or not holder.isalnum():
        return None
    return holder.decode(), value


class Lease:
    """A held lease on :attr:`key`, yielded by :meth:`Bucket.lock` and
    :meth:`Election.campaign`. It is renewed in the background until the block is left.

    :attr:`token` is the fencing token: the revision of the create that acquired the lease,
    strictly increasing across the holders of one key (see docs/LOCKS.md for when it is not).
    :attr:`held` turns False for good once the lease is lost or may be: a renewal was refused,
    or the client could not renew it in time (by its monotonic clock, counted conservatively).
    Pass it as ``fence=`` to a write to make the server refuse that write once the lease is
    lost (:class:`LeaseLostError`, nothing stored).
    """

    def __init__(self, bucket: LeaseBucket, key: str, value: bytes, ttl: int) -> None:
        self._bucket = bucket
        self._key = key
        self._value = value
        self._ttl = ttl
        self._holder = NUID().next().decode()
        self._record = _record(self._holder, value)
        self._token = 0
        self._revision = 0
        self._sent = 0.0
        self._valid_until = 0.0
        self._lost: str | None = "not acquired yet"
        self._ambiguous = False  # a write of the lease key may have landed unseen
        self._gone = asyncio.Event()  # set once held turned False
        self._writing = asyncio.Lock()  # one write of the lease key at a time
        self._renewer: asyncio.Task[None] | None = None
        self._creating: asyncio.Future[int] | None = None  # the create of an acquisition

    # -- what users read ----------------------------------------------------------------------

    @property
    def key(self) -> str:
        """The lease key (the lock's or election's name)."""
        return self._key

    @property
    def bucket(self) -> str:
        """The name of the bucket the lease key is in."""
        return self._bucket.name

    @property
    def value(self) -> bytes:
        """The value stored with the lease (an election candidate's; empty for a lock)."""
        return self._value

    @property
    def ttl(self) -> int:
        """The lease TTL in seconds."""
        return self._ttl

    @property
    def token(self) -> int:
        """The fencing token: the revision of the create that acquired the lease."""
        return self._token

    @property
    def revision(self) -> int:
        """The lease key's latest revision written by this holder (renewals move it)."""
        return self._revision

    @property
    def held(self) -> bool:
        """Whether the lease is still held as far as the client can tell: False once a
        renewal or fenced write was refused, once the client could not renew it in time, and
        after release. Once False, it stays False."""
        if self._lost is None and self._expired():
            self._lose("not renewed within its TTL")
        return self._lost is None

    async def wait_lost(self) -> None:
        """Return once :attr:`held` is False (lost, maybe lost, or released)."""
        while not self._gone.is_set():
            if not self.held:
                return
            remaining = self._valid_until - _now()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(remaining, 0.0)):
                    await self._gone.wait()

    def __repr__(self) -> str:
        state = "held" if self.held else f"lost ({self._lost})"
        return f"<Lease {self._key!r} token={self._token} revision={self._revision} {state}>"

    # -- acquiring, renewing, releasing -------------------------------------------------------

    async def _take(self, *, over: int | None = None) -> bool:
        """Create the lease key; False if another holder has it, or if the server's answer
        came too late to count on the lease (given back). ``over``: the revision of a
        tombstone or expiry marker a watch just saw as the key's last message: written on
        condition that it still is (one request, where a create over a tombstone needs
        three), and False if it no longer is (the watch will show what came after it).

        Raises:
            MessageTTLDisabledError: the bucket has no per-message TTL (nothing stored).
            JetStreamError: the create failed otherwise.
        """
        sent = _now()
        bucket = self._bucket
        # Shielded: a caller cancelled meanwhile leaves the create to finish, so that
        # _abandon learns whether it landed and gives the key back (a read right after the
        # cancel could be answered before the server stored the create).
        self._creating = asyncio.ensure_future(
            bucket.create(self._key, self._record, ttl=self._ttl)
            if over is None
            else bucket.update(self._key, self._record, over, ttl=self._ttl)
        )
        try:
            revision = await asyncio.shield(self._creating)
        except (KeyExistsError, WrongRevisionError):
            self._creating = None
            return False
        self._creating = None
        self._token = self._revision = revision
        self._accepted(revision, sent)
        if self._expired():  # answered too late to count on (a stalled server): not held
            await self._give_back()
            self._token = self._revision = 0
            return False
        self._lost = None
        self._renewer = asyncio.ensure_future(self._renew_forever())
        return True

    async def release(self) -> None:
        """Stop renewing and give the key back (a purge conditioned on this holder's
        revision, so the next waiter goes on at once); leaving the ``async with`` block does
        this, so call it only to let go earlier. A lost or released lease is left alone.
        Never raises for the server: a release that fails leaves the key to its TTL. A
        caller cancelled meanwhile is cancelled once the release is over (a purge cut short
        would leave the key taken until its TTL runs out)."""
        await finished(self._release())

    async def _release(self) -> None:
        await self._stop_renewing()
        async with self._writing:
            if self._lost is None:
                self._lose("released")
                await self._give_back()

    async def _abandon(self) -> None:
        """After an acquisition cut short (cancelled while its create was in flight): give
        the key back if the create landed after all."""
        await self._stop_renewing()
        self._lose("acquisition cut short")
        creating, self._creating = self._creating, None
        if creating is None:
            if self._revision:  # acquired: cut short after the create
                await self._give_back()
            return
        try:
            async with asyncio.timeout(_GIVE_BACK_TIMEOUT):
                self._revision = await asyncio.shield(creating)
        except (JetStreamError, TimeoutError) as exc:
            creating.cancel()  # refused (nothing to give back), or the TTL will free it
            _log.debug("lease %r: acquisition cut short: %s", self._key, exc)
            return
        await self._give_back()

    async def _stop_renewing(self) -> None:
        renewer, self._renewer = self._renewer, None
        if renewer is not None and renewer is not asyncio.current_task():
            renewer.cancel()
            await asyncio.gather(renewer, return_exceptions=True)

    async def _renew_forever(self) -> None:
        interval = self._ttl / _RENEWALS_PER_TTL
        due = self._sent + interval
        while True:
            await asyncio.sleep(max(due - _now(), 0.0))
            async with self._writing:
                if not self.held:  # also: the process was paused past the TTL
                    await self._give_back()
                    return
                try:
                    async with asyncio.timeout(self._valid_until - _now()):
                        await self._renew()
                except (WrongRevisionError, KeyNotFoundError, BucketNotFoundError) as exc:
                    self._lose(f"renewal refused: {exc}")
                    return
                except ConnectionClosedError as exc:  # for good: nothing can renew it now
                    self._lose(f"cannot renew: {exc}")
                    return
                except (JetStreamError, TimeoutError) as exc:
                    _log.warning("lease %r: renewal failed, retrying: %s", self._key, exc)
                    self._ambiguous = True
                    due = _now() + _RETRY
                    continue
            due = self._sent + interval

    async def _renew(self) -> None:
        if self._ambiguous:
            await self._resync()
        sent = _now()
        self._ambiguous = True  # until the server's answer is in
        revision = await self._bucket.update(self._key, self._record, self._revision, ttl=self._ttl)
        self._accepted(revision, sent)

    async def _resync(self) -> None:
        """After a write whose outcome is unknown: learn the lease key's revision, which is
        still this holder's only if the key's live record carries this holder's id (no other
        client writes it, and each of this holder's writes was conditioned on the one before).

        Raises:
            KeyNotFoundError: the key has no live value (it expired or was released).
            WrongRevisionError: another holder's record is there.
        """
        entry = await self._bucket.get(self._key)
        found = holder_value(entry.value)
        if found is None or found[0] != self._holder:
            raise WrongRevisionError(self._key, self._revision, entry.revision, err_code=0)
        self._revision = entry.revision
        self._ambiguous = False

    async def _give_back(self) -> None:
        """Purge the key if it is still this holder's, best effort (the TTL frees it
        otherwise)."""
        try:
            async with asyncio.timeout(_GIVE_BACK_TIMEOUT):
                if self._ambiguous:
                    await self._resync()
                if self._revision:
                    await self._bucket.purge(self._key, revision=self._revision)
        except (JetStreamError, TimeoutError) as exc:
            _log.debug("lease %r: not given back (its TTL frees it): %s", self._key, exc)

    # -- the state every write of the lease key updates ---------------------------------------

    def _accepted(self, revision: int, sent: float) -> None:
        """The server stored a write of the lease key sent at ``sent`` as ``revision``."""
        self._revision = revision
        self._sent = sent
        self._valid_until = sent + self._ttl * _SAFE_FRACTION
        self._ambiguous = False

    def _expired(self) -> bool:
        return _now() >= self._valid_until

    def _lose(self, reason: str) -> None:
        if self._lost is None:
            self._lost = reason
        self._gone.set()

    def _lost_error(self) -> LeaseLostError:
        return LeaseLostError(self._key, self._token, self._lost or "lost")


class Fence:
    """The lease key's write inside a fenced batch, while the lease's writes wait for it:
    ``record`` written with ``ttl``, on condition that the key is at ``revision``."""

    def __init__(self, lease: Lease) -> None:
        self._lease = lease
        self.key = lease.key
        self.record = lease._record
        self.ttl = lease.ttl
        self.revision = lease.revision
        self.sent = _now()
        lease._ambiguous = True  # until the batch's outcome is known

    def stored(self, revision: int) -> None:
        """The batch was stored; the lease key is at ``revision`` (renewed)."""
        self._lease._accepted(revision, self.sent)

    def refused(self) -> LeaseLostError:
        """The server refused the batch because the lease key moved on: the lease is lost."""
        self._lease._lose("a fenced write was refused: the lease key changed")
        return self._lease._lost_error()


@contextlib.asynccontextmanager
async def fencing(lease: Lease) -> AsyncIterator[Fence]:
    """Hold ``lease``'s writes for the length of one fenced batch commit.

    Raises:
        LeaseLostError: the lease is lost already (nothing is sent).
    """
    async with lease._writing:
        if not lease.held:
            raise lease._lost_error()
        if lease._ambiguous:
            try:
                await lease._resync()
            except (WrongRevisionError, KeyNotFoundError) as exc:
                lease._lose(f"the lease key changed: {exc}")
                raise lease._lost_error() from exc
        yield Fence(lease)


_CLOCK: int | None = getattr(
    time, {"linux": "CLOCK_BOOTTIME", "darwin": "CLOCK_MONOTONIC"}.get(sys.platform, ""), None
)
"""The clock, of those that run on while the machine is suspended, as the server's TTL does
(a laptop or VM asleep past the TTL would read its lease as held otherwise):
``time.monotonic()`` stops during a suspend on Linux and macOS, not on Windows."""


async def finished(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` to its end even if the caller is cancelled meanwhile; the cancel
    is raised once it is over. For writes of a lease key: one cut short in flight leaves its
    outcome unknown, and a read to learn it may be answered before the write lands."""
    task = asyncio.ensure_future(awaitable)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved: the caller was cancelled, it sees no outcome
        raise


def _now() -> float:
    # Only differences of it are used, also as durations for the event loop's timers.
    return time.monotonic() if _CLOCK is None else time.clock_gettime(_CLOCK)
