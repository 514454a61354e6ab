"""Options of consume / fetch / next, checked against ADR-37's constraints before anything is
sent, with ADR-37's defaults filled in.

consume: ``max_messages`` (default 500) **or** ``max_bytes`` bounds what is requested and
buffered; ``expires`` >= 1 s (default 30 s); ``heartbeat`` 0.5..30 s and at most ``expires / 2``
(default ``expires / 2`` capped to 30 s); each threshold 0..its limit (default half).
fetch / next: ``expires`` > 0; heartbeats are off unless asked for, except that a pull of more
than 30 s gets one by default (ADR-37), so that a dead server is noticed before the pull ends.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from .._errors import ClientValidationError
from .._protocol.duration import DurationValue, seconds_of

__all__ = [
    "BYTES_MODE_BATCH",
    "DEFAULT_EXPIRES",
    "DEFAULT_MAX_MESSAGES",
    "FetchOptions",
    "PullOptions",
    "fetch_options",
    "pull_options",
    "sized_options",
]

DEFAULT_MAX_MESSAGES: Final = 500
DEFAULT_EXPIRES: Final = 30.0
BYTES_MODE_BATCH: Final = 1_000_000
"""The batch of a pull bounded by bytes: large, because batch 0 means one message (ADR-37)."""
MIN_EXPIRES: Final = 1.0
MAX_HEARTBEAT: Final = 30.0
MIN_HEARTBEAT: Final = 0.5
FETCH_HEARTBEAT_AFTER: Final = 30.0
"""Fetches (and nexts) with a longer ``expires`` get idle heartbeats by default (ADR-37)."""
FETCH_HEARTBEAT: Final = 5.0
"""Their default heartbeat (nats.go's): a dead pull is noticed after 10 s, not at its end."""


@dataclasses.dataclass(frozen=True)
class PullOptions:
    """Validated consume options (see :func:`pull_options`)."""

    max_messages: int
    max_bytes: int
    expires: float
    heartbeat: float
    threshold_messages: int
    threshold_bytes: int
    memory_bytes: int = 0
    """With ``max_messages``: fewer messages asked for when they are large, to hold about this
    many bytes (our ordered consumers; 0: off)."""
    largest_message: int = 1
    """With ``memory_bytes``: the largest message there may be (the server's max_payload),
    which sizes the first pull."""

    @property
    def bytes_mode(self) -> bool:
        return self.max_bytes > 0

    @property
    def counts_sizes(self) -> bool:
        """Whether the window needs each message's size."""
        return self.max_bytes > 0 or self.memory_bytes > 0


@dataclasses.dataclass(frozen=True)
class FetchOptions:
    """Validated fetch / next options (see :func:`fetch_options`); ``heartbeat`` 0 = none."""

    batch: int
    max_bytes: int
    expires: float
    heartbeat: float


def _count(value: int | None, name: str, *, minimum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ClientValidationError(f"{name} must be an integer: {value!r}")
    if value < minimum:
        raise ClientValidationError(f"{name} must be at least {minimum}: {value}")
    return value


def _heartbeat(value: DurationValue, expires: float) -> float:
    heartbeat = seconds_of(value, name="heartbeat")
    if not MIN_HEARTBEAT <= heartbeat <= MAX_HEARTBEAT or heartbeat > expires / 2:
        raise ClientValidationError(
            f"heartbeat must be between {MIN_HEARTBEAT:g}s and {MAX_HEARTBEAT:g}s and at most "
            f"expires/2 ({expires / 2:g}s): {heartbeat:g}s"
        )
    return heartbeat


def _threshold(value: int | None, name: str, limit: int, used: bool) -> int:
    if value is None:
        return limit // 2
    if not used:
        raise ClientValidationError(f"{name} is only for consume bounded by the same limit")
    checked = _count(value, name, minimum=0)
    assert checked is not None
    if checked > limit:
        raise ClientValidationError(f"{name} cannot be above its limit {limit}: {checked}")
    return checked


def pull_options(
    *,
    max_messages: int | None = None,
    max_bytes: int | None = None,
    expires: DurationValue = DEFAULT_EXPIRES,
    heartbeat: DurationValue | None = None,
    threshold_messages: int | None = None,
    threshold_bytes: int | None = None,
) -> PullOptions:
    """Check and complete consume options with ADR-37's defaults (module docstring).

    Raises:
        ClientValidationError: both limits; a limit below 1; ``expires`` below 1 s; a heartbeat
            outside 0.5..30 s or above ``expires / 2``; a negative threshold, one above its
            limit, or one for the limit not in use.
    """
    if max_messages is not None and max_bytes is not None:
        raise ClientValidationError("give max_messages or max_bytes, not both")
    limit_bytes = _count(max_bytes, "max_bytes", minimum=1) or 0
    messages = _count(max_messages, "max_messages", minimum=1) or DEFAULT_MAX_MESSAGES
    expires = seconds_of(expires, name="expires")
    if expires < MIN_EXPIRES:
        raise ClientValidationError(f"expires must be at least {MIN_EXPIRES:g}s: {expires:g}s")
    if heartbeat is None:
        beat = max(MIN_HEARTBEAT, min(expires / 2, MAX_HEARTBEAT))
    else:
        beat = _heartbeat(heartbeat, expires)
    return PullOptions(
        max_messages=BYTES_MODE_BATCH if limit_bytes else messages,
        max_bytes=limit_bytes,
        expires=expires,
        heartbeat=beat,
        threshold_messages=_threshold(
            threshold_messages, "threshold_messages", messages, not limit_bytes
        ),
        threshold_bytes=_threshold(
            threshold_bytes, "threshold_bytes", limit_bytes, bool(limit_bytes)
        ),
    )


def sized_options(
    *,
    max_messages: int,
    memory_bytes: int,
    largest_message: int,
    expires: DurationValue,
    heartbeat: DurationValue,
) -> PullOptions:
    """Consume options of our own: at most ``max_messages`` requested and buffered, fewer
    when they are large, to hold about ``memory_bytes`` (0: not fitted to sizes); until sizes
    are seen, messages are taken to be ``largest_message`` bytes.

    Raises:
        ClientValidationError: as :func:`pull_options`, or a negative ``memory_bytes``.
    """
    options = pull_options(max_messages=max_messages, expires=expires, heartbeat=heartbeat)
    memory = _count(memory_bytes, "memory_bytes", minimum=0) or 0
    return dataclasses.replace(
        options, memory_bytes=memory, largest_message=max(1, largest_message)
    )


def fetch_options(
    *,
    max_messages: int | None = None,
    max_bytes: int | None = None,
    expires: DurationValue = DEFAULT_EXPIRES,
    heartbeat: DurationValue | None = None,
) -> FetchOptions:
    """Check one pull's options: ``max_messages`` (default 1) or ``max_bytes``, ``expires``,
    and a heartbeat (default: none, or 5 s when ``expires`` is above 30 s).

    Raises:
        ClientValidationError: both limits, a limit below 1, ``expires`` not positive, a
            heartbeat outside 0.5..30 s or above ``expires / 2``.
    """
    if max_messages is not None and max_bytes is not None:
        raise ClientValidationError("give max_messages or max_bytes, not both")
    limit_bytes = _count(max_bytes, "max_bytes", minimum=1) or 0
    batch = _count(max_messages, "max_messages", minimum=1) or 1
    seconds = seconds_of(expires, name="expires")
    if seconds <= 0:
        raise ClientValidationError(f"expires must be positive: {seconds:g}s")
    if heartbeat is not None:
        beat = _heartbeat(heartbeat, seconds)
    else:
        beat = FETCH_HEARTBEAT if seconds > FETCH_HEARTBEAT_AFTER else 0.0
    return FetchOptions(
        batch=BYTES_MODE_BATCH if limit_bytes else batch,
        max_bytes=limit_bytes,
        expires=seconds,
        heartbeat=beat,
    )
