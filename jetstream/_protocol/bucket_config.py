"""Names and limits that KV buckets and object stores share: both are streams named
``<PREFIX>_<name>``, with the same limits, so both packages check them here, once."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterable, AsyncIterator
from datetime import timedelta
from typing import Final, Protocol

from .._errors import InvalidBucketConfigError, InvalidBucketNameError
from .duration import parse_duration

__all__ = [
    "MAX_BUCKET_NAME",
    "StreamLimits",
    "check_size",
    "check_stream_limits",
    "valid_bucket_names",
    "validate_bucket_name",
]

_BUCKET: Final = re.compile(r"[a-zA-Z0-9_-]+")
MAX_BUCKET_NAME: Final = 255 - len("KV_")  # stream names are limited to 255 characters
_SERVER_METADATA_PREFIX: Final = "_nats."


def validate_bucket_name(name: str) -> None:
    """Check a bucket or store name: ``[a-zA-Z0-9_-]+``, at most 252 characters.

    Raises:
        InvalidBucketNameError: the name breaks a rule.
    """
    if not isinstance(name, str) or not _BUCKET.fullmatch(name):
        raise InvalidBucketNameError(
            f"invalid bucket name {name!r}: use only letters, digits, '-' and '_'"
        )
    if len(name) > MAX_BUCKET_NAME:
        raise InvalidBucketNameError(f"bucket name longer than {MAX_BUCKET_NAME} characters")


async def valid_bucket_names(
    streams: AsyncIterable[str], prefix: str, log: logging.Logger
) -> AsyncIterator[str]:
    """The names of the ``<prefix><name>`` streams among ``streams`` whose name passes
    :func:`validate_bucket_name`. Anyone may create a stream ``KV_x+y`` or one whose name
    holds control characters: it is skipped, with a warning on ``log`` (the name escaped),
    rather than listed as a bucket no call can open."""
    async for stream in streams:
        if not stream.startswith(prefix):
            continue
        name = stream[len(prefix) :]
        try:
            validate_bucket_name(name)
        except InvalidBucketNameError:
            log.warning("skipped stream %r: no bucket or store may be named %r", stream, name)
            continue
        yield name


class StreamLimits(Protocol):
    """What :func:`check_stream_limits` reads (``BucketConfig`` and ``StoreConfig`` have it)."""

    @property
    def max_age(self) -> timedelta | None: ...
    @property
    def marker_ttl(self) -> timedelta | None: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def storage(self) -> str: ...
    @property
    def replicas(self) -> int: ...
    @property
    def metadata(self) -> dict[str, str]: ...


def check_stream_limits(config: StreamLimits) -> None:
    """Normalise and check the limits buckets and object stores share.

    ``max_age`` and ``marker_ttl`` may be given as seconds, a ``timedelta`` or a duration
    string (``"1h"``, ``"30d"``); they are stored back as ``timedelta`` s (``config`` may be a
    frozen dataclass). ``max_bytes``, ``storage``, ``replicas`` and ``metadata`` are checked.

    Raises:
        InvalidBucketConfigError: a value is out of range.
    """
    for name in ("max_age", "marker_ttl"):
        value = getattr(config, name)
        if value is not None:
            parsed = parse_duration(value, name=name, error=InvalidBucketConfigError)
            object.__setattr__(config, name, parsed)
    _check_duration("max_age", config.max_age)
    _check_duration("marker_ttl", config.marker_ttl, at_least=timedelta(seconds=1), whole=True)
    check_size("max_bytes", config.max_bytes)
    if config.storage not in ("file", "memory"):
        raise InvalidBucketConfigError(f"storage must be 'file' or 'memory': {config.storage!r}")
    if isinstance(config.replicas, bool) or config.replicas not in range(1, 6):
        raise InvalidBucketConfigError(f"replicas must be 1..5: {config.replicas!r}")
    if any(key.startswith(_SERVER_METADATA_PREFIX) for key in config.metadata):
        raise InvalidBucketConfigError("metadata keys starting with '_nats.' are the server's")


def check_size(name: str, value: object) -> None:
    """A size limit: ``-1`` (none) or a positive int.

    Raises:
        InvalidBucketConfigError: anything else (bools included).
    """
    if isinstance(value, bool) or not isinstance(value, int) or value == 0 or value < -1:
        raise InvalidBucketConfigError(f"{name} must be -1 or a positive int: {value!r}")


def _check_duration(
    name: str, value: timedelta | None, *, at_least: timedelta | None = None, whole: bool = False
) -> None:
    """None, or a positive timedelta (``at_least`` long, in whole seconds if ``whole``)."""
    if value is None:
        return
    if value <= timedelta(0):
        raise InvalidBucketConfigError(f"{name} must be positive (None for no limit): {value}")
    if at_least is not None and value < at_least:
        raise InvalidBucketConfigError(f"{name} must be at least {at_least}: {value}")
    if whole and value % timedelta(seconds=1):
        raise InvalidBucketConfigError(f"{name} must be whole seconds: {value}")
