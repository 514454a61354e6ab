"""Election: leader election on one lease key; the leader's value is stored with its lease."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager

from jetstream._errors import check_bytes_like

from ._errors import KeyNotFoundError
from ._keys import validate_wait
from ._lease import Lease, LeaseBucket, check_lease_value, holder_value
from ._lock import held_lease
from ._models import Op

__all__ = ["Election"]


class Election:
    """Leader election on the key ``name`` of a bucket (from :meth:`Bucket.election`)::

        election = bucket.election("leaders.indexer", ttl="5s")
        async with election.campaign(b"node-1") as lease:   # returns when elected
            ...                                            # leaving resigns
        await election.leader()                            # the leader's value, or None
        async for value in election.observe(): ...         # every new leader, once

    A leader is a :class:`Lease` holder: it leads while its lease is held (``lease.held``),
    and its writes can be fenced with ``fence=lease``. A leader whose process dies is
    replaced once its TTL runs out (plus the waiters' poll interval on a bucket without
    ``marker_ttl``; see docs/LOCKS.md).
    """

    def __init__(self, bucket: LeaseBucket, name: str, ttl: int) -> None:
        self._bucket = bucket
        self._name = name
        self._ttl = ttl

    @property
    def name(self) -> str:
        """The election's key."""
        return self._name

    @property
    def ttl(self) -> int:
        """The leader's lease TTL in seconds."""
        return self._ttl

    def campaign(
        self, value: bytes, *, timeout: float | None = None
    ) -> AbstractAsyncContextManager[Lease]:
        """Wait to be elected with ``value`` (what :meth:`leader` and :meth:`observe` show
        while this candidate leads); the block runs as leader, and leaving it resigns.

        Raises:
            WrongTypeError: ``value`` is not bytes-like (at once, nothing written).
            ValueTooLargeError: ``value`` does not fit the bucket's ``max_value_size`` with
                the holder id the lease stores before it (at once, nothing written).
            ClientValidationError: a negative ``timeout``.
            LockTimeoutError: (entering) not elected within ``timeout`` seconds.
            MessageTTLDisabledError: (entering) the bucket has no per-message TTL.
        """
        data = bytes(check_bytes_like(value, "value"))
        check_lease_value(data, self._bucket.config.max_value_size, self._bucket.name)
        validate_wait(timeout)
        return held_lease(self._bucket, self._name, data, self._ttl, timeout)

    async def leader(self) -> bytes | None:
        """The current leader's value, or None when there is none.

        Raises:
            BucketNotFoundError: the bucket was deleted.
        """
        try:
            entry = await self._bucket.get(self._name)
        except KeyNotFoundError:
            return None
        found = holder_value(entry.value)
        return None if found is None else found[1]

    async def observe(self) -> AsyncIterator[bytes]:
        """The value of every leader, the current one first (if any), each once, as each is
        elected; renewals are not changes, and a leader elected twice is seen twice. Runs
        until the caller stops iterating.

        Raises:
            BucketNotFoundError: the bucket was deleted.
        """
        current: str | None = None
        async with self._bucket.watch(self._name) as watcher:
            async for entry in watcher:
                found = holder_value(entry.value) if entry.op is Op.PUT else None
                if found is None:
                    current = None
                elif found[0] != current:
                    current = found[0]
                    yield found[1]
