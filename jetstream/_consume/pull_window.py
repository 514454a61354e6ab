"""Window accounting of a continuous pull (ADR-37 "Buffering messages"), as pure state: no I/O,
no clock of its own (callers pass ``now``), so every rule is unit-tested on its own.

The window holds ``max_messages`` (or ``max_bytes``) *outstanding*: requested from the server
but not delivered (pending) plus delivered but not taken by the caller (buffered). A pull goes
out when the room left (limit - outstanding) reaches the threshold's share, and asks for exactly
that room, so the buffer never holds more than one window whatever the caller's speed.

Rules added to the ADR's algorithm so that consume always makes progress without storms:

* **Never a pull too small for the next message.** A ``409 Message Size Exceeds MaxBytes`` says
  the next message is larger than what that pull had left; the window remembers that lower bound
  and sends no pull with less room (the room grows as the caller takes messages). If the bound
  is above the whole window, the message can never fit: :meth:`ended` says so once.
* **No batch of 0.** A threshold equal to its limit still waits for a room of one.
* **Re-pulls after a pull that ended with nothing are rate-limited** (doubling from 50 ms up
  to 5 s; reset by the next delivered message), whatever ended it: a size refusal with no
  message delivered since the previous one, a limit refusal, no responders.
* **A window fitted to sizes** (``memory_bytes``, our ordered consumers): counted pulls whose
  limit is ``memory_bytes`` over the average size of the messages delivered since the last
  pull, at most ``max_messages``. Never ``max_bytes`` in those pulls: nats-server skips a
  ``last_per_subject`` consumer's listed message that a pull's bytes cannot take.
* **The consumer's own limits** (``409 Exceeded MaxRequestBatch/Expires/MaxBytes``) shrink the
  window to them; the refused pull is given back (it delivered nothing).
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import math
from typing import Final

import msgspec

from .pull_options import PullOptions

__all__ = ["Limit", "PullRequest", "PullWindow"]

_NS: Final = 1_000_000_000
RETRY_FIRST: Final = 0.05
RETRY_MAX: Final = 5.0
_REFUSAL_HORIZON: Final = 10.0
"""Seconds a sent pull is remembered, to find it when the server refuses it (at once)."""


@dataclasses.dataclass(frozen=True)
class PullRequest:
    """One ``CONSUMER.MSG.NEXT`` request; ``max_bytes`` 0 means no byte limit."""

    batch: int
    max_bytes: int
    expires: float
    heartbeat: float

    def encode(self, priority: dict[str, str] | None = None) -> bytes:
        """The request body; ``priority`` adds a priority group's ``group`` and pin ``id``."""
        body: dict[str, int | str] = {
            "batch": self.batch,
            "expires": int(self.expires * _NS),
            "idle_heartbeat": int(self.heartbeat * _NS),
        }
        if self.max_bytes:
            body["max_bytes"] = self.max_bytes
        if priority:
            body.update(priority)
        return msgspec.json.encode(body)


class Limit(enum.Enum):
    """A consumer-side limit a pull was refused for (409 Exceeded ...)."""

    BATCH = "MaxRequestBatch"
    EXPIRES = "MaxRequestExpires"
    MAX_BYTES = "MaxRequestMaxBytes"
    WAITING = "MaxWaiting"


class PullWindow:
    """Pending and buffered counts of one consume, and the decision when and what to pull."""

    def __init__(self, options: PullOptions) -> None:
        self._opts = options
        self._bytes_mode = options.bytes_mode  # read for every message
        self.pending_msgs = 0  # requested, not delivered
        self.pending_bytes = 0
        self.buffered_msgs = 0  # delivered, not taken
        self.buffered_bytes = 0
        self._need_bytes = 0  # the next message is larger than this - 1 (from 409 size)
        self._never_fits_told = False
        self._failures = 0  # pulls ended with nothing since the last delivered message
        self._delivered_since_end = True  # a message arrived since the last 409 size
        self._not_before = 0.0
        self._batch_cap: int | None = None
        self._bytes_cap: int | None = None
        self._expires_cap: float | None = None
        self._sent: collections.deque[tuple[float, PullRequest]] = collections.deque()
        # memory_bytes: the message limit fitted to the sizes delivered since the last pull.
        self._fitted: int | None = None
        if options.memory_bytes:  # until sizes are seen, every message may be the largest
            self._fitted = max(1, options.memory_bytes // options.largest_message)
        self._recent_msgs = 0
        self._recent_bytes = 0
        self.memory_cap = math.inf
        """Buffered bytes that call for starting over: a pull fitted to small messages that
        brought large ones (never below two of the largest)."""
        if options.memory_bytes:
            self.memory_cap = max(4 * options.memory_bytes, 2 * options.largest_message)
        self._set_limits()  # again when a cap is learned or the sizes change the fit

    # -- what the window holds ----------------------------------------------------------------

    @property
    def outstanding_msgs(self) -> int:
        return self.pending_msgs + self.buffered_msgs

    @property
    def outstanding_bytes(self) -> int:
        return self.pending_bytes + self.buffered_bytes

    def _set_limits(self) -> None:
        self._limit, self._threshold = self._limits()
        # The room a pull needs, but in bytes mode (where a message too large raises it).
        self._wanted = min(max(1, self._limit - self._threshold), self._limit)

    def _limits(self) -> tuple[int, int]:
        """(limit, threshold) in the unit in use, fitted to the sizes seen (``memory_bytes``)
        and shrunk to a consumer limit learned."""
        opts = self._opts
        if opts.bytes_mode:
            limit, threshold, cap = opts.max_bytes, opts.threshold_bytes, self._bytes_cap
        elif self._fitted is not None:
            limit = min(opts.max_messages, self._fitted)
            threshold, cap = limit * opts.threshold_messages // opts.max_messages, self._batch_cap
        else:
            limit, threshold, cap = opts.max_messages, opts.threshold_messages, self._batch_cap
        if cap is not None and cap < limit:
            threshold, limit = threshold * cap // limit, cap
        return limit, threshold

    # -- deciding -----------------------------------------------------------------------------

    def _room(self) -> int:
        if self._bytes_mode:
            return self._limit - self.pending_bytes - self.buffered_bytes
        return self._limit - self.pending_msgs - self.buffered_msgs

    def has_room(self) -> bool:
        """Whether the room left is enough for a pull (whatever the time): the cheap test
        before :meth:`request`."""
        if not self._bytes_mode:
            return self._limit - self.pending_msgs - self.buffered_msgs >= self._wanted
        # A message that never fits (need_bytes above the limit): full pulls.
        wanted = min(max(self._wanted, self._need_bytes), self._limit)
        return self._limit - self.pending_bytes - self.buffered_bytes >= wanted

    def request(self, now: float) -> PullRequest | None:
        """The pull to send now, counted as pending; None when none is due."""
        if now < self._not_before:
            return None
        if self._recent_msgs and self._fitted is not None:
            self._fit_to_sizes()
        if not self.has_room():
            return None
        pull = self._sized(self._room())
        self.pending_msgs += pull.batch
        self.pending_bytes += pull.max_bytes
        self._remember(now, pull)
        return pull

    def _sized(self, room: int) -> PullRequest:
        opts = self._opts
        expires = (
            opts.expires if self._expires_cap is None else min(opts.expires, self._expires_cap)
        )
        heartbeat = min(opts.heartbeat, expires / 2)
        if opts.bytes_mode:
            batch = opts.max_messages if self._batch_cap is None else self._batch_cap
            return PullRequest(batch, room, expires, heartbeat)
        return PullRequest(room, 0, expires, heartbeat)

    def _fit_to_sizes(self) -> None:
        """Fit the message limit to ``memory_bytes`` by the average size of the messages
        delivered since the last pull (never ``max_bytes`` in the pulls: see the module
        docstring)."""
        average = max(1, self._recent_bytes // self._recent_msgs)
        self._recent_msgs = self._recent_bytes = 0
        fitted = max(1, self._opts.memory_bytes // average)
        if fitted != self._fitted:
            self._fitted = fitted
            self._set_limits()

    def _remember(self, now: float, pull: PullRequest) -> None:
        while self._sent and now - self._sent[0][0] > _REFUSAL_HORIZON:
            self._sent.popleft()
        self._sent.append((now, pull))

    # -- events -------------------------------------------------------------------------------

    def delivered(self, size: int) -> None:
        """A message arrived (``size`` as the server counts it; 0 outside bytes mode)."""
        if self.pending_msgs:
            self.pending_msgs -= 1
        if size:
            self.pending_bytes = max(0, self.pending_bytes - size)
        self.buffered_msgs += 1
        self.buffered_bytes += size
        self._recent_msgs += 1
        self._recent_bytes += size
        self._need_bytes = 0
        self._never_fits_told = False
        self._failures = 0
        self._not_before = 0.0
        self._delivered_since_end = True

    def taken(self, size: int) -> bool:
        """The caller took a delivered message; returns :meth:`has_room` (this is on the path
        of every message taken: one call, not two)."""
        self.buffered_msgs -= 1
        self.buffered_bytes -= size
        if not self._bytes_mode:
            return self._limit - self.pending_msgs - self.buffered_msgs >= self._wanted
        return self.has_room()

    def ended(self, msgs: int, size: int, now: float, *, too_large: bool = False) -> bool:
        """A pull ended undelivered ``msgs``/``size`` (``Nats-Pending-*``); ``too_large`` for a
        409 Message Size Exceeds MaxBytes. True the first time the next message turns out
        larger than the whole window (it can never be delivered)."""
        self._give_back(msgs, size)
        if not too_large:
            return False
        self._need_bytes = max(self._need_bytes, size + 1)
        if not self._delivered_since_end:  # a pull that ended the usual way (messages, then a
            self._fail_once(now)  # message too large for the rest) is no reason to wait
        self._delivered_since_end = False
        if self._need_bytes > self._limit and not self._never_fits_told:
            self._never_fits_told = True
            return True
        return False

    def refused(self, limit: Limit, value: float | None, now: float) -> None:
        """The server refused a pull for a consumer limit (``value``, when it says it): give
        that pull back and keep later pulls within the limit."""
        if limit is Limit.BATCH and value is not None:
            self._batch_cap = max(1, int(value))
        elif limit is Limit.MAX_BYTES and value is not None:
            self._bytes_cap = max(1, int(value))
        elif limit is Limit.EXPIRES and value is not None:
            self._expires_cap = value
        self._set_limits()
        pull = self._refused_pull(limit)
        if pull is not None:
            self._give_back(pull.batch, pull.max_bytes)
        self._fail_once(now)

    def _refused_pull(self, limit: Limit) -> PullRequest | None:
        """The pull a refusal answers: the oldest one over the limit (the server checks in
        arrival order), or for MaxWaiting the newest (it found the queue full)."""
        if not self._sent:
            return None
        if limit is Limit.WAITING:
            return self._sent.pop()[1]
        for index, (_, pull) in enumerate(self._sent):
            if self._over(pull, limit):
                del self._sent[index]
                return pull
        return self._sent.pop()[1]

    def _over(self, pull: PullRequest, limit: Limit) -> bool:
        if limit is Limit.BATCH:
            return self._batch_cap is not None and pull.batch > self._batch_cap
        if limit is Limit.MAX_BYTES:
            return self._bytes_cap is not None and pull.max_bytes > self._bytes_cap
        return self._expires_cap is not None and pull.expires > self._expires_cap

    def failed(self, now: float) -> None:
        """Every pull is gone with nothing delivered (no responders, a reset): start over,
        rate-limited."""
        self.reset()
        self._fail_once(now)

    def reset(self) -> None:
        """Forget what was requested (a reconnect or missed heartbeats); the buffer stays."""
        self.pending_msgs = 0
        self.pending_bytes = 0
        self._sent.clear()

    def _give_back(self, msgs: int, size: int) -> None:
        self.pending_msgs = max(0, self.pending_msgs - msgs)
        self.pending_bytes = max(0, self.pending_bytes - size)

    def _fail_once(self, now: float) -> None:
        self._failures += 1
        delay = min(RETRY_FIRST * 2 ** (self._failures - 1), RETRY_MAX)
        self._not_before = now + delay

    @property
    def heartbeat(self) -> float:
        """The idle heartbeat of the pulls sent now (smaller under a consumer's max_expires)."""
        return self._sized(1).heartbeat

    @property
    def retry_at(self) -> float:
        """When a rate-limited pull may go (0 when not limited)."""
        return self._not_before
