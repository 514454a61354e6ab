"""KeyBatch: atomic multi-key writes to one bucket (``Bucket.batch()`` and ``put_many``)."""

from __future__ import annotations

import msgspec

from jetstream import (
    AtomicBatch,
    BatchClosedError,
    BatchTooLargeError,
    ClientValidationError,
    MessageNotFoundError,
    TTLValue,
    WrongLastSequenceError,
    WrongTypeError,
)
from jetstream import headers as hdr
from jetstream._protocol.limits import check_message_size, header_lines_size
from jetstream._publish.atomic import (
    DEFAULT_COMMIT_DEADLINE,
    DEFAULT_MAX_BATCH,
    batch_header_size,
)
from jetstream._resource import AsyncResource

from ._core import BucketCore, BytesLike
from ._errors import InvalidKeyError, KeyExistsError, WrongRevisionError
from ._keys import validate_limits, validate_revision
from ._lease import Fence, Lease, fencing, finished
from ._models import Op, op_from_headers

__all__ = ["KeyBatch"]


class _Write(msgspec.Struct, frozen=True):
    key: str
    subject: str
    """The key's subject (the key as its codec stores it)."""
    data: bytes
    headers: dict[str, str]
    expect: int | None
    """Revision the key must have at commit (0: none); None: no condition."""
    create: bool = False
    """``create`` semantics: no live value, tombstones and expiry markers allowed."""
    unsealed: bool = False
    """``data`` is the plain value, sealed by the bucket's encryption while the batch is sent
    (its ``Jetstore-Enc`` header is already in ``headers``)."""


class KeyBatch(AsyncResource):
    """Writes to several keys of one bucket that are stored all together or not at all.

    Get one from :meth:`Bucket.batch`. Each method validates its input at once (a bad key, TTL
    or value raises before anything is sent) and queues the write; nothing is sent before the
    commit, which happens when the ``async with`` block exits normally. An exception in the block
    abandons the batch. After commit, :attr:`revisions` maps each key to its new revision.

    A key may be written once per batch, unless the batch was made with ``repeats=True``: then
    a key may be written again, each write its own revision in the order queued, as long as the
    later write carries no condition and no rollup (the server refuses a condition or a rollup
    on a subject already written in the batch: a ``create``/``update``/``revision=``, a purge,
    or a TTL on a bucket keeping more than one revision). Conditions (``create``, ``update``,
    ``revision=``) are checked by the server at commit against the bucket as it was before the
    batch; if one fails nothing is stored and :class:`WrongRevisionError` (or
    :class:`KeyExistsError`) names the key.

    A batch made with ``fence=lease`` also rewrites the lease key, conditioned on the lease's
    revision, as its last write: if the lease was lost the server refuses the whole batch and
    :class:`LeaseLostError` is raised (nothing stored); if stored, the lease is renewed.
    """

    def __init__(
        self,
        bucket: BucketCore,
        *,
        max_keys: int = DEFAULT_MAX_BATCH,
        timeout: float | None = None,
        deadline: float = DEFAULT_COMMIT_DEADLINE,
        repeats: bool = False,
        fence: Lease | None = None,
    ) -> None:
        validate_limits(max_keys, timeout, deadline)
        if fence is not None:
            if not isinstance(fence, Lease):
                raise WrongTypeError(f"fence must be a Lease, not {type(fence).__name__}")
            if fence.bucket != bucket.name:
                raise ClientValidationError(
                    f"the lease on {fence.key!r} is of bucket {fence.bucket!r}, not {bucket.name!r}"
                )
            if max_keys < 2:
                raise ClientValidationError("a fenced batch needs max_keys >= 2 (one is the lease)")
        self._fence = fence
        self._core = bucket
        self._max_keys = max_keys
        self._timeout = timeout
        self._deadline = deadline
        self._repeats = repeats
        self._writes: list[_Write] = []
        self._keys: set[str] = set()
        self._closed = False
        self.revisions: dict[str, int] | None = None
        """Each key's new revision (a key written more than once: its last), once committed."""

    def __len__(self) -> int:
        return len(self._writes)

    # -- queueing -----------------------------------------------------------------------------

    def put(self, key: str, value: BytesLike, *, ttl: TTLValue | None = None) -> None:
        """Queue a value for ``key`` (see :meth:`Bucket.put`).

        Raises:
            InvalidKeyError, InvalidTTLError, ValueTooLargeError, WrongTypeError: bad input.
            BatchTooLargeError, BatchClosedError: no room, or the batch is over.
        """
        self._queue(key, value, self._core.ttl_headers(ttl), expect=None)

    def create(self, key: str, value: BytesLike, *, ttl: TTLValue | None = None) -> None:
        """Queue a value stored only if ``key`` has no live value (see :meth:`Bucket.create`).

        Raises:
            As :meth:`put`; the condition itself is checked at commit.
        """
        self._queue(key, value, self._core.ttl_headers(ttl), expect=0, create=True)

    def update(
        self, key: str, value: BytesLike, revision: int, *, ttl: TTLValue | None = None
    ) -> None:
        """Queue a value stored only if ``key`` is at ``revision`` (see :meth:`Bucket.update`).

        Raises:
            As :meth:`put`; ClientValidationError for a revision below 1.
        """
        validate_revision(revision, allow_zero=False)
        self._queue(key, value, self._core.ttl_headers(ttl), expect=revision)

    def delete(self, key: str, *, revision: int | None = None) -> None:
        """Queue a delete tombstone (see :meth:`Bucket.delete`).

        Raises:
            InvalidKeyError, ClientValidationError, BatchTooLargeError, BatchClosedError.
        """
        if revision is not None:
            validate_revision(revision, allow_zero=True)
        self._queue(key, b"", self._core.delete_headers(), expect=revision)

    def purge(self, key: str, *, ttl: TTLValue | None = None, revision: int | None = None) -> None:
        """Queue a purge (see :meth:`Bucket.purge`).

        Raises:
            InvalidKeyError, InvalidTTLError, ClientValidationError, BatchTooLargeError,
            BatchClosedError.
        """
        if revision is not None:
            validate_revision(revision, allow_zero=True)
        self._queue(key, b"", self._core.purge_headers(ttl), expect=revision)

    def _queue(
        self,
        key: str,
        value: BytesLike,
        headers: dict[str, str],
        *,
        expect: int | None,
        create: bool = False,
    ) -> None:
        """Validate and queue one write.

        Raises:
            BatchClosedError: the batch was committed or abandoned.
            InvalidKeyError: a bad key, or a key already in the batch (with ``repeats``: a
                conditioned write or a rollup of one).
            BatchTooLargeError: more than ``max_keys`` writes.
            ValueTooLargeError, WrongTypeError: a bad value.
        """
        if self._closed:
            raise BatchClosedError("the batch was already committed or abandoned")
        if self._fence is not None and key == self._fence.key:
            raise InvalidKeyError(f"key {key!r} is the fence's lease key; the fence writes it")
        subject = self._core.subject(key)
        if key in self._keys:
            self._check_repeat(key, headers, expect)
        room = self._max_keys - (self._fence is not None)
        if len(self._writes) >= room:
            fenced = " besides the fence's lease key" if self._fence is not None else ""
            raise BatchTooLargeError(f"a batch holds at most {room} keys{fenced}")
        self._writes.append(
            self._checked_write(key, subject, value, headers, expect=expect, create=create)
        )
        self._keys.add(key)

    def _checked_write(
        self,
        key: str,
        subject: str,
        value: BytesLike,
        headers: dict[str, str],
        *,
        expect: int | None,
        create: bool = False,
    ) -> _Write:
        """One write, sealed (or ready to be) and checked to fit at the batch's next place."""
        data = self._core.payload(value)
        unsealed = False
        if self._core.value_stages and hdr.KV_OPERATION not in headers:
            # A stage may add headers of its own: ``headers`` is a fresh dict of this write.
            unsealed = self._core.defer_seal(headers)
            if not unsealed:
                data = self._core.seal(subject, data, headers)
        # Checked now as the commit will check it (sealed, with its condition and the batch's
        # headers at its position), so a batch holding it fails before anything is sent: a
        # prepared batch's writes are all storable unless the last one, which also carries the
        # commit, is too large then (checked before sending too).
        size = len(data) + (self._core.seal_overhead if unsealed else 0)
        room = batch_header_size(len(self._writes) + 1)
        if expect is not None:
            room += header_lines_size({hdr.EXPECTED_LAST_SUBJECT_SEQUENCE: str(expect)})
        check_message_size(self._core.js.nc, subject, headers, size, extra_headers=room)
        return _Write(key, subject, data, headers, expect, create, unsealed)

    def _check_repeat(self, key: str, headers: dict[str, str], expect: int | None) -> None:
        """Raises InvalidKeyError: ``key`` is queued already, and this batch takes no repeats,
        or this write is one the server refuses on a subject the batch already writes."""
        if not self._repeats:
            raise InvalidKeyError(f"key {key!r} appears twice in the batch; write it once")
        if expect is not None or hdr.ROLLUP in headers:
            raise InvalidKeyError(
                f"key {key!r} is already in the batch: a later write of it may carry no "
                "condition, purge or TTL rollup (the server refuses them)"
            )

    # -- commit -------------------------------------------------------------------------------

    def abandon(self) -> None:
        """Drop every queued write; nothing is sent."""
        self._closed = True

    async def _enter(self) -> None:
        if self._closed:
            raise BatchClosedError("the batch was already committed or abandoned")

    async def _exit(self, error: BaseException | None) -> None:
        if error is not None:
            self.abandon()
        elif not self._closed:
            await self.commit()

    async def commit(self) -> dict[str, int]:
        """Store every queued write atomically; return each key's new revision.

        Raises:
            BatchClosedError: already committed or abandoned.
            KeyExistsError: a ``create`` found a live value (nothing stored).
            WrongRevisionError: a revision condition failed; names the key (nothing stored).
            CommitUnknownError: the outcome could not be learned before the deadline.
            BucketNotFoundError: the bucket was deleted (by any client); nothing stored.
            LeaseLostError: (a fenced batch) the lease is not held; nothing stored.
            JetStreamError: any other definite rejection (nothing stored).
        """
        if self._closed:
            raise BatchClosedError("the batch was already committed or abandoned")
        self._closed = True
        async with self._core.missing:
            return await self._commit()

    async def _commit(self) -> dict[str, int]:
        writes = [await self._resolve_create(w) if w.create else w for w in self._writes]
        if self._fence is None:
            return await self._send(writes, None)
        async with fencing(self._fence) as fence:
            # To its end even if cancelled: the lease must learn whether its key moved.
            return await finished(self._send(writes, fence))

    async def _send(self, writes: list[_Write], fence: Fence | None) -> dict[str, int]:
        if fence is not None:
            # The lease key, rewritten (renewed) only if still at the lease's revision.
            headers = self._core.ttl_headers(fence.ttl)
            subject = self._core.subject(fence.key)
            writes = [
                *writes,
                self._checked_write(
                    fence.key, subject, fence.record, headers, expect=fence.revision
                ),
            ]
        batch = AtomicBatch(
            self._core.js,
            stream=self._core.stream,
            max_messages=max(self._max_keys, len(writes)),
            timeout=self._timeout,
            deadline=self._deadline,
            seal=self._core.seal_deferred,
            seal_overhead=self._core.seal_overhead,
        )
        for write in writes:
            headers = dict(write.headers)
            if write.expect is not None:
                headers[hdr.EXPECTED_LAST_SUBJECT_SEQUENCE] = str(write.expect)
            # Keys, values and headers were validated when queued; skip AtomicBatch.add's checks.
            batch._append(write.subject, write.data, headers, unsealed=write.unsealed)
        try:
            ack = await batch.commit()
        except WrongLastSequenceError as exc:
            if fence is not None and await self._fence_moved(fence):
                raise fence.refused() from exc
            raise await self._conflict(writes, exc) from exc
        revisions = {}
        for write, seq in zip(writes, ack.sequences, strict=True):
            self._core.own_writes.note(write.subject, seq)
            revisions[write.key] = seq
        if fence is not None:
            fence.stored(revisions.pop(fence.key))
        self.revisions = revisions
        return revisions

    async def _fence_moved(self, fence: Fence) -> bool:
        """Whether the lease key is no longer where the fence expected it."""
        return await self._core.latest_revision(fence.key) != fence.revision

    async def _resolve_create(self, write: _Write) -> _Write:
        """``create`` may overwrite a tombstone or an expiry marker: expect its revision."""
        try:
            last = await self._core.last_message(write.key)
        except MessageNotFoundError:
            return write
        if op_from_headers(last.headers) is Op.PUT:
            raise KeyExistsError(write.key, last.seq, err_code=0)
        return msgspec.structs.replace(write, expect=last.seq)

    async def _conflict(
        self, writes: list[_Write], exc: WrongLastSequenceError
    ) -> WrongLastSequenceError:
        """Name the key whose condition failed (the server's error does not say)."""
        for write in writes:
            if write.expect is None:
                continue
            current = await self._core.latest_revision(write.key)
            if current != write.expect:
                if write.create:
                    return KeyExistsError(write.key, current, err_code=exc.err_code)
                return WrongRevisionError(write.key, write.expect, current, err_code=exc.err_code)
        return exc  # every condition holds again: a concurrent writer came and went
