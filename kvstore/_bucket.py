"""Bucket: reads and writes of one KV bucket, with per-key TTL and compare-and-set."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Any, TypeVar

from jetstream import (
    AsyncListing,
    ClientValidationError,
    JetStream,
    Keyring,
    MessageNotFoundError,
    RekeyReport,
    TTLValue,
    WrongLastSequenceError,
    WrongTypeError,
)
from jetstream._errors import check_bytes_like
from jetstream._protocol.message import ns_of_time
from jetstream._publish.atomic import DEFAULT_COMMIT_DEADLINE, DEFAULT_MAX_BATCH

from ._batch import KeyBatch
from ._codecs import KeyCodec
from ._compact import compact_deletes
from ._core import BucketCore, BytesLike, expecting
from ._election import Election
from ._encryption import EncryptionStage
from ._errors import (
    InvalidKeyError,
    KeyDecodeError,
    KeyExistsError,
    KeyNotFoundError,
)
from ._keys import (
    checked_pairs,
    validate_revision,
    validate_wait,
)
from ._lease import Lease, checked_lease_ttl
from ._lock import held_lease
from ._models import (
    BucketConfig,
    BucketStatus,
    Entry,
    Op,
    bucket_config_from_stream,
    op_from_headers,
)
from ._name_codec import NEW_NAME_FORMAT
from ._rekey import rekey_bucket
from ._snapshot import Snapshot, read_snapshot
from ._stages import ValueStage
from ._typed import TypedBucket, ValueFormat
from ._watch import History, KeyWatcher, iter_keys

__all__ = ["Bucket", "BytesLike"]

T = TypeVar("T")

_CREATE_ATTEMPTS = 3
_CONTENDED_KEYS = 1024  # keys remembered as refused by create (a bounded LRU)
_DEFAULT_PURGE_DELETES_AGE = timedelta(minutes=30)


class Bucket:
    """A KV bucket bound to a :class:`jetstream.JetStream` context.

    Get one from :func:`kvstore.create_bucket` or :func:`kvstore.open_bucket`.

    **TTL.** ``put``, ``create``, ``update`` and ``purge`` take ``ttl`` (seconds, ``timedelta``,
    a Go duration such as ``"1h"``, or ``"never"``), at least one whole second. A TTL is a *key*
    TTL: when it fires, ``get`` raises :class:`KeyNotFoundError` and watchers see
    ``Op.EXPIRED`` (if the bucket has ``marker_ttl``). On a bucket keeping history (> 1) the
    server would otherwise expire only the newest revision and silently bring the previous
    value back, so a write with a TTL also rolls the key up (``Nats-Rollup: sub``): it removes
    the key's earlier revisions and starts its history afresh. ``"never"`` exempts a value
    from the bucket's ``max_age``. On buckets with ``marker_ttl`` and history > 1 the server
    would silently raise a TTL shorter than ``marker_ttl`` to ``marker_ttl``; we refuse such a
    TTL with :class:`InvalidTTLError` instead, so a key never lives longer than asked.

    **Keys.** Opened with ``key_codec=`` (:class:`Base64KeyCodec`, :class:`PathKeyCodec`...),
    every method takes and returns your keys and the codec maps them to stored keys the way
    orbit.go ``kvcodec`` does; :meth:`typed` gives a view with typed values. See
    docs/CODECS.md.

    **A deleted bucket.** Once any client deletes the bucket, every operation of the handle
    (and of its typed views, batches, watches and listings, also those running at that
    moment) raises :class:`BucketNotFoundError` naming it, whatever the server answered (a
    503 on the bucket's subjects is first confirmed by one stream info request: an election
    is waited out as before). The handle names a bucket: one created again under the name is
    read and written by its one-shot operations, with the options the handle was opened
    with (open it again for new ones; a bucket made without direct get answers its reads
    with :class:`NoRespondersError`); a watch that ran across the delete ends with
    :class:`BucketNotFoundError` instead of going on in the new bucket, whose revisions start
    over (a listing too, unless the new bucket already holds more revisions than it had read).
    """

    def __init__(
        self,
        js: JetStream,
        name: str,
        config: BucketConfig,
        *,
        direct: bool = True,
        key_codec: KeyCodec | None = None,
        value_stages: Sequence[ValueStage] = (),
        encryption: EncryptionStage | None = None,
        name_format: str | None = NEW_NAME_FORMAT,
    ) -> None:
        self._core = BucketCore(
            js,
            name,
            config,
            direct=direct,
            key_codec=key_codec,
            value_stages=value_stages,
            encryption=encryption,
            name_format=name_format,
        )
        self._contended: OrderedDict[str, None] = OrderedDict()  # keys create found taken

    @property
    def name(self) -> str:
        """The bucket name."""
        return self._core.name

    @property
    def stream(self) -> str:
        """The backing stream, ``KV_<name>``."""
        return self._core.stream

    @property
    def js(self) -> JetStream:
        """The JetStream context this handle reads and writes through."""
        return self._core.js

    @property
    def key_codec(self) -> KeyCodec | None:
        """The key codec every key and filter goes through (None: keys are stored as given);
        an :class:`EncryptedKeyCodec` given to the bucket is bound to it here."""
        return self._core.key_codec

    @property
    def encryption(self) -> Keyring | None:
        """The keyring values are encrypted with (None: values are stored as given)."""
        return None if self._core.encryption is None else self._core.encryption.keyring

    def typed(self, value_type: type[T], *, format: ValueFormat = "json") -> TypedBucket[T]:
        """A view of this bucket whose values are ``value_type`` instances (a msgspec
        Struct, a dataclass, ``dict[str, int]``... anything msgspec encodes), stored as JSON
        or MessagePack. See :class:`TypedBucket`.

        Raises:
            ClientValidationError: an unknown ``format``, or a type msgspec cannot handle.
        """
        return TypedBucket(self, value_type, format=format)

    @property
    def config(self) -> BucketConfig:
        """The configuration read when the bucket was opened or created."""
        return self._core.config

    @property
    def max_key_length(self) -> int:
        """The longest key (or key filter) this bucket accepts on this connection.

        Every request naming a key must fit the server's control line (4096 bytes by default;
        a longer one makes the server close the connection): the longest is a watch's
        filtered consumer create, ``$JS.API.CONSUMER.CREATE.<stream>.<name>.$KV.<bucket>.<key>``
        with its reply inbox and size. Longer keys raise :class:`InvalidKeyError`.
        """
        return self._core.max_key_length

    def __repr__(self) -> str:
        codec = f" key_codec={self._core.key_codec!r}" if self._core.key_codec is not None else ""
        enc = (
            f" encryption={self._core.encryption.keyring!r}"
            if self._core.encryption is not None
            else ""
        )
        return f"<Bucket {self._core.name!r} history={self._core.config.history}{codec}{enc}>"

    # -- writes -------------------------------------------------------------------------------

    async def put(
        self,
        key: str,
        value: BytesLike,
        *,
        ttl: TTLValue | None = None,
        fence: Lease | None = None,
    ) -> int:
        """Store ``value`` under ``key``; return its revision.

        With ``fence=lease`` the value is stored only while ``lease`` is held: it is sent as
        an atomic batch with the lease key's rewrite, conditioned on the lease's revision
        (see :meth:`batch`).

        Raises:
            InvalidKeyError, InvalidTTLError, ValueTooLargeError: bad input; nothing is sent.
                A TTL below the bucket's ``marker_ttl`` is refused when history > 1; a key
                longer than :attr:`max_key_length`, or a value that with its headers exceeds
                the server's ``max_payload``, is refused (the server would drop the connection).
            WrongTypeError: ``value`` is not bytes-like.
            StorageLimitError: the bucket is full (``max_bytes``).
            BucketNotFoundError: the bucket was deleted (by any client).
            LeaseLostError: (``fence``) the lease is not held; nothing stored.
            JetStreamError: any other server error.
        """
        if fence is not None:
            batch = self.batch(fence=fence)
            batch.put(key, value, ttl=ttl)
            return (await batch.commit())[key]
        return await self._core.write(key, value, self._core.ttl_headers(ttl))

    async def create(self, key: str, value: BytesLike, *, ttl: TTLValue | None = None) -> int:
        """Store ``value`` only if ``key`` has no live value; return its revision.

        Succeeds over a delete or purge tombstone and over an expiry marker, as nats.go does.

        Raises:
            KeyExistsError: the key has a live value (``.revision`` is its revision).
            InvalidKeyError, InvalidTTLError, ValueTooLargeError, WrongTypeError: bad input.
            BucketNotFoundError: the bucket was deleted (by any client).
        """
        headers = self._core.ttl_headers(ttl)
        for _ in range(_CREATE_ATTEMPTS):
            # On a key whose last create was refused (a lock someone holds), the key's last
            # message is asked for alongside the write: a refusal then needs no second round
            # trip to tell a live value from a tombstone. A read served before a write that
            # then refused ours (older than the sequence the refusal names) is asked again.
            peek = (
                asyncio.ensure_future(self._core.last_message_or_none(key))
                if key in self._contended
                else None
            )
            try:
                revision = await self._core.write(key, value, expecting(headers, 0))
            except WrongLastSequenceError as exc:
                error = exc
            except BaseException:
                if peek is not None:
                    peek.cancel()
                raise
            else:
                if peek is not None:
                    await _discard(peek)
                self._contended.pop(key, None)
                return revision
            last = await peek if peek is not None else None
            if last is None or error.last_sequence is None or last.seq < error.last_sequence:
                last = await self._core.last_message_or_none(key, at_least=error.last_sequence or 0)
            if last is None:
                continue  # the blocking value expired meanwhile: try again from scratch
            if op_from_headers(last.headers) is Op.PUT:
                self._note_contended(key)
                raise KeyExistsError(key, last.seq, err_code=error.err_code) from error
            try:
                return await self._core.write(key, value, expecting(headers, last.seq))
            except WrongLastSequenceError as exc:
                error = exc  # someone wrote in between: look again
        raise KeyExistsError(key, None, err_code=error.err_code) from error

    async def update(
        self, key: str, value: BytesLike, revision: int, *, ttl: TTLValue | None = None
    ) -> int:
        """Store ``value`` only if ``key``'s latest revision is ``revision``; return the new one.

        Raises:
            WrongRevisionError: the latest revision differs (``.current`` says which it is).
            InvalidKeyError, InvalidTTLError, ValueTooLargeError, WrongTypeError: bad input.
            ClientValidationError: ``revision`` is not a positive int.
            BucketNotFoundError: the bucket was deleted (by any client).
        """
        validate_revision(revision, allow_zero=False)
        return await self._core.write_expecting(key, value, self._core.ttl_headers(ttl), revision)

    async def delete(
        self, key: str, *, revision: int | None = None, fence: Lease | None = None
    ) -> int:
        """Write a delete tombstone (history is kept); return its revision.

        With ``revision``, only if that is the key's latest revision; with ``fence=lease``,
        only while ``lease`` is held (as :meth:`put`).

        Raises:
            WrongRevisionError: ``revision`` was given and is not the latest.
            InvalidKeyError: bad key.
            BucketNotFoundError: the bucket was deleted (by any client).
            LeaseLostError: (``fence``) the lease is not held; nothing stored.
        """
        if fence is not None:
            batch = self.batch(fence=fence)
            batch.delete(key, revision=revision)
            return (await batch.commit())[key]
        headers = self._core.delete_headers()
        if revision is None:
            return await self._core.write(key, b"", headers)
        validate_revision(revision, allow_zero=True)
        return await self._core.write_expecting(key, b"", headers, revision)

    async def purge(
        self, key: str, *, ttl: TTLValue | None = None, revision: int | None = None
    ) -> int:
        """Remove every revision of ``key`` and leave a purge tombstone; return its revision.

        With ``ttl`` the tombstone itself disappears after that time (no marker is left).
        With ``revision``, only if that is the key's latest revision.

        Raises:
            WrongRevisionError: ``revision`` was given and is not the latest.
            InvalidKeyError, InvalidTTLError: bad input.
            BucketNotFoundError: the bucket was deleted (by any client).
        """
        headers = self._core.purge_headers(ttl)
        if revision is None:
            return await self._core.write(key, b"", headers)
        validate_revision(revision, allow_zero=True)
        return await self._core.write_expecting(key, b"", headers, revision)

    async def purge_deletes(
        self, *, older_than: timedelta | None = _DEFAULT_PURGE_DELETES_AGE
    ) -> int:
        """Compact tombstones and expiry markers: those older than ``older_than`` (default
        30 min; None or zero = all) are removed with the key's whole history; newer ones are
        kept but the history before them is removed. Returns how many keys were removed
        entirely. A tombstone a peer stored on a subject with a wildcard token (the server
        stores ``$KV.<b>.t.>`` as a literal subject) is left alone with a warning: as a purge
        filter it would remove every key it matches. One purge request per tombstone, up to
        32 in flight; a failure stops it (running it again continues with what is left).

        Raises:
            JetStreamError: the scan or a purge failed.
            BucketNotFoundError: the bucket was deleted (by any client).
        """
        async with self._core.missing:
            return await compact_deletes(self._core, older_than)

    async def rekey(self) -> RekeyReport:
        """Re-encrypt every live value sealed with a key other than the keyring's primary
        (and, with ``allow_plaintext``, every plain value) with the primary.

        Each value is rewritten by compare-and-set on the revision read, so a value someone
        writes meanwhile is never overwritten (counted as ``changed``); what is left of a
        value's TTL is kept. Safe to interrupt and run again: it continues with what is left.
        Values stay readable throughout (keep the old keys in the ring until it returns).
        Older revisions (history > 1) keep their keys; a rewrite restarts the bucket's
        ``max_age`` clock for that value.

        Raises:
            ClientValidationError: the bucket was not opened with ``encryption=``.
            BucketNotFoundError: the bucket was deleted (by any client).
            JetStreamError: the scan or a write failed (run it again to continue).
        """
        if self._core.encryption is None:
            raise ClientValidationError(
                f"bucket {self._core.name!r} was opened without encryption="
            )
        async with self._core.missing:
            return await rekey_bucket(self._core, self._core.encryption)

    # -- atomic multi-key writes --------------------------------------------------------------

    def batch(
        self,
        *,
        max_keys: int = DEFAULT_MAX_BATCH,
        timeout: float | None = None,
        deadline: float = DEFAULT_COMMIT_DEADLINE,
        repeats: bool = False,
        fence: Lease | None = None,
    ) -> KeyBatch:
        """An atomic multi-key write, as an async context manager::

            async with bucket.batch() as b:
                b.put("alice.city", b"Paris")
                b.update("alice.zip", b"75001", revision=7)
                b.delete("alice.phone")
            print(b.revisions)

        Commits on normal exit (all writes stored or none), abandons on an exception.
        ``max_keys`` follows the server's ``max_batch_size`` (1000 by default); ``deadline`` is
        how long a commit whose reply was lost is resolved before :class:`CommitUnknownError`.
        ``repeats=True`` lets a key be written more than once (each write its own revision, in
        order: a change log applied as it came). See :class:`KeyBatch`.

        ``fence=lease`` (a :class:`Lease` of this bucket) makes the batch also rewrite the
        lease key, on condition that it is still at the lease's revision: once the lease is
        lost (expired, taken by another holder) the server refuses the whole batch and
        :class:`LeaseLostError` is raised, nothing stored. The rewrite renews the lease, and
        takes one of the ``max_keys`` places; the batch may not write the lease key itself.

        Raises:
            ClientValidationError: ``max_keys``, ``timeout`` or ``deadline`` out of range, or
                a ``fence`` of another bucket (or ``max_keys`` 1 with a fence); WrongTypeError
                for a ``fence`` that is not a :class:`Lease`.
        """
        return KeyBatch(
            self._core,
            max_keys=max_keys,
            timeout=timeout,
            deadline=deadline,
            repeats=repeats,
            fence=fence,
        )

    async def put_many(
        self,
        items: Mapping[str, BytesLike] | Iterable[tuple[str, BytesLike]],
        *,
        expect: Mapping[str, int] | None = None,
        ttl: TTLValue | Mapping[str, TTLValue] | None = None,
        max_keys: int = DEFAULT_MAX_BATCH,
        deadline: float = DEFAULT_COMMIT_DEADLINE,
        fence: Lease | None = None,
    ) -> dict[str, int]:
        """Store several keys atomically: all of them or none. Returns ``{key: revision}``.

        ``expect`` maps keys to the revision they must have (0 = no live value, as
        :meth:`create`); ``ttl`` is one TTL for every key or a mapping of per-key TTLs. A key
        may appear once. Everything is validated before anything is sent. With
        ``fence=lease`` the keys are stored only while ``lease`` is held (see :meth:`batch`).

        Raises:
            InvalidKeyError: a bad key, a repeated key, or an ``expect``/``ttl`` key not written.
            InvalidTTLError, ValueTooLargeError, WrongTypeError: bad TTLs or values, or
                ``items`` neither a mapping nor (key, value) pairs.
            ClientValidationError: ``max_keys`` or ``deadline`` out of range.
            BatchTooLargeError: more than ``max_keys`` keys.
            WrongRevisionError, KeyExistsError: an ``expect`` condition failed; names the key.
            CommitUnknownError: the outcome could not be learned before the deadline.
            BucketNotFoundError: the bucket was deleted (by any client).
            LeaseLostError: (``fence``) the lease is not held; nothing stored.
        """
        batch = self.prepare_many(
            items, expect=expect, ttl=ttl, max_keys=max_keys, deadline=deadline, fence=fence
        )
        return await batch.commit()

    def prepare_many(
        self,
        items: Mapping[str, BytesLike] | Iterable[tuple[str, BytesLike]],
        *,
        expect: Mapping[str, int] | None = None,
        ttl: TTLValue | Mapping[str, TTLValue] | None = None,
        max_keys: int = DEFAULT_MAX_BATCH,
        deadline: float = DEFAULT_COMMIT_DEADLINE,
        fence: Lease | None = None,
    ) -> KeyBatch:
        """What :meth:`put_many` would send, checked and queued but not sent: ``await
        batch.commit()`` stores it. Preparing every batch of a large import first refuses bad
        input before the first batch is stored (``jetstore kv put-many`` does this).

        Raises:
            As :meth:`put_many`, up to ``BatchTooLargeError`` (nothing is sent).
        """
        pairs = checked_pairs(items)
        if expect is not None and not isinstance(expect, Mapping):
            raise WrongTypeError(f"expect must map keys to revisions, not {type(expect).__name__}")
        expect = dict(expect or {})
        for expected in expect.values():
            validate_revision(expected, allow_zero=True)  # False or 0.0 is not "create"
        ttls = dict(ttl) if isinstance(ttl, Mapping) else {key: ttl for key, _ in pairs}
        written = {key for key, _ in pairs}
        strays = (set(expect) | set(ttls)) - written
        if strays:
            raise InvalidKeyError(
                f"expect/ttl name keys that are not written: {sorted(map(repr, strays))}"
            )
        batch = self.batch(max_keys=max_keys, deadline=deadline, fence=fence)
        for key, value in pairs:
            key_ttl = ttls.get(key)
            revision = expect.get(key)
            if revision is None:
                batch.put(key, value, ttl=key_ttl)
            elif revision == 0:
                batch.create(key, value, ttl=key_ttl)
            else:
                batch.update(key, value, revision, ttl=key_ttl)
        return batch

    # -- coordination -------------------------------------------------------------------------

    def lock(
        self, name: str, *, ttl: TTLValue = "10s", timeout: float | None = None
    ) -> AbstractAsyncContextManager[Lease]:
        """A lock on the key ``name``, held for the length of an ``async with`` block::

            async with bucket.lock("jobs.nightly", ttl="10s", timeout=30) as lease:
                await bucket.put_many({"report.day": b"..."}, fence=lease)

        Entering waits (up to ``timeout`` seconds; None: for ever; 0: one attempt) until the
        key is free and creates it with ``ttl``; the lease is renewed in the background
        (every third of the TTL, by compare-and-set) and released (purged, conditioned on
        its revision) when the block is left, so the next waiter goes on at once. A holder
        that dies frees the key when its TTL runs out. ``lease.token`` is a fencing token,
        ``lease.held`` turns False once the lease is lost; ``fence=lease`` on a write makes
        the server refuse it then. See :class:`Lease` and docs/LOCKS.md.

        Raises:
            InvalidKeyError: a bad ``name`` (at once, nothing written).
            InvalidTTLError: a bad ``ttl``: ``"never"``, below the minimum (3 s, named), below
                ``marker_ttl`` (history > 1) or above ``max_age`` (at once, nothing written).
            ClientValidationError: a negative ``timeout`` (at once).
            LockTimeoutError: (entering) not acquired within ``timeout``; nothing held.
            MessageTTLDisabledError: (entering) the bucket has no per-message TTL
                (``allow_msg_ttl``); nothing written.
            BucketNotFoundError: (entering) the bucket was deleted.
        """
        ttl_seconds = self._lease_ttl(name, ttl)
        validate_wait(timeout)
        return held_lease(self, name, b"", ttl_seconds, timeout)

    def election(self, name: str, *, ttl: TTLValue = "10s") -> Election:
        """A leader election on the key ``name`` whose leader holds a lease of ``ttl``
        (see :class:`Election`).

        Raises:
            InvalidKeyError, InvalidTTLError: as :meth:`lock` (at once, nothing written).
        """
        return Election(self, name, self._lease_ttl(name, ttl))

    def _lease_ttl(self, name: str, ttl: TTLValue) -> int:
        self._core.subject(name)  # InvalidKeyError for a bad name, before anything is sent
        return checked_lease_ttl(self._core, ttl)

    async def get_many(self, keys: Iterable[str]) -> Snapshot:
        """Read several keys as of one point in time: never half of a ``put_many``.

        Returns a :class:`Snapshot` (a mapping of key to live :class:`Entry`) with ``.missing``
        (keys without a live value) and ``.revision`` (the stream sequence it reflects). Any
        number of keys, under any concurrent writes: beyond 1000 keys the batched reads share
        one ``up_to_seq``; a key whose revision at that point was replaced meanwhile (history 1)
        makes the whole read repeat at a newer point, and after a few tries the keys are read
        through a consumer snapshot instead. The result is always the bucket at one sequence.

        Raises:
            InvalidKeyError: a bad key; nothing is sent.
            JetStreamError: the bucket lacks direct get, or a request failed.
            BucketNotFoundError: the bucket was deleted (by any client).
        """
        async with self._core.missing:
            return await read_snapshot(self._core, keys)

    # -- watching and listing -----------------------------------------------------------------

    def watch(
        self,
        keys: str | list[str] = ">",
        *,
        include_history: bool = False,
        updates_only: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        resume_from: int | None = None,
    ) -> KeyWatcher:
        """Watch keys matching ``keys`` (a filter such as ``"alice.>"`` or a list of them)::

            async with bucket.watch("alice.>") as watcher:
                async for entry in watcher:     # entry.op: PUT, DELETE, PURGE or EXPIRED
                    ...

        See :class:`KeyWatcher` for the options; ``resume_from`` starts at that revision.

        Raises:
            InvalidKeyError: a bad filter; ClientValidationError: conflicting options (both at
                once, before anything is sent).
            FilterNotSupportedError: a wildcard the key codec cannot encode.
            BucketNotFoundError: (entering or iterating) the bucket was deleted, also while
                the watch ran: it ends then, even if a bucket of its name was created again.
        """
        return KeyWatcher(
            self._core,
            keys,
            include_history=include_history,
            updates_only=updates_only,
            ignore_deletes=ignore_deletes,
            meta_only=meta_only,
            resume_from=resume_from,
        )

    def keys(self, filters: str | list[str] = ">") -> AsyncListing[str]:
        """Keys that have a live value, optionally matching filters (filtered by the server):
        ``async for`` or ``await`` (a list).

        Raises:
            InvalidKeyError: a bad filter (as a codec stores it).
            FilterNotSupportedError: a wildcard the key codec cannot encode.
            BucketNotFoundError: (iterating) the bucket was deleted, also while it ran.
        """
        return AsyncListing(iter_keys(self._core, self._core.filter_subjects(filters)))

    def history(self, key: str) -> AsyncListing[Entry]:
        """Every stored revision of ``key``, oldest first (tombstones and markers included):
        ``async for`` or ``await`` (a list).

        Raises:
            InvalidKeyError: a bad key.
            KeyNotFoundError: the key has no stored revision (raised at the end).
            DecryptionError: (encrypted bucket) a revision does not open; iterate again to go
                on with the next one.
            BucketNotFoundError: (iterating) the bucket was deleted, also while it ran.
        """
        return AsyncListing(History(self._core, key, self._core.subject(key)))

    # -- reads --------------------------------------------------------------------------------

    async def get(self, key: str, *, revision: int | None = None) -> Entry:
        """The live value of ``key`` (or the given ``revision`` of it).

        Tombstones and expiry markers count as no value.

        Raises:
            KeyNotFoundError: no live value (never written, deleted, purged, expired, or the
                revision is not a value of this key).
            InvalidKeyError: bad key.
            BucketNotFoundError: the bucket was deleted (by any client).
        """
        if revision is None:
            try:
                message = await self._core.last_message(key)
            except MessageNotFoundError as exc:
                raise KeyNotFoundError(key) from exc
        else:
            validate_revision(revision, allow_zero=False)
            message = await self._core.message_at(key, revision)
        entry = self._core.entry(message)
        if entry.op is not Op.PUT:
            raise KeyNotFoundError(
                key, f"key {key!r}: {entry.op.name.lower()} at revision {entry.revision}"
            )
        return entry

    async def status(self) -> BucketStatus:
        """The bucket's configuration and size, fresh from the server.

        Raises:
            BucketNotFoundError: the bucket was deleted (by any client).
        """
        async with self._core.missing:
            info = await self._core.js.stream_info(self._core.stream)
        return BucketStatus(
            bucket=self._core.name,
            values=info.state.messages,
            bytes=info.state.bytes,
            config=bucket_config_from_stream(info.config),
            stream_info=info,
        )

    # -- internals ----------------------------------------------------------------------------

    def _note_contended(self, key: str) -> None:
        self._contended[key] = None
        self._contended.move_to_end(key)
        if len(self._contended) > _CONTENDED_KEYS:
            self._contended.popitem(last=False)

    def decode_entry(
        self,
        subject: str,
        value: bytes,
        *,
        revision: int,
        created: datetime,
        headers: dict[str, str] | None,
    ) -> Entry:
        """The entry a message of this bucket's stream stands for, decoded exactly as
        :meth:`get` and :meth:`watch` decode it: the key through the key codec, the value
        through the value stages (decrypted), ``op`` from the headers (``Op.EXPIRED`` for a
        server expiry marker; tombstones and markers have an empty value, whatever payload a
        peer sent with them). For messages read elsewhere, e.g. a copy sourced into another
        stream, with ``subject`` and ``revision`` as they were in this bucket.

        Raises:
            KeyDecodeError: ``subject`` is not a key subject of this bucket, or the key codec
                cannot decode its key (it was not written through the codec).
            DecryptionError: (encrypted bucket) the value does not open; ``.key`` names it.
            WrongTypeError: ``subject`` is not a str, ``value`` not bytes-like, ``created`` not
                a datetime with a time zone, or ``headers`` neither a dict of str to str nor
                None (nats-py's ``Msg.headers`` for a message without).
        """
        if not isinstance(subject, str):
            raise WrongTypeError(f"subject must be a str, not {type(subject).__name__}")
        if not isinstance(created, datetime) or created.utcoffset() is None:
            raise WrongTypeError(f"created must be a datetime with a time zone: {created!r}")
        check_bytes_like(value, "value")
        if headers is not None and not isinstance(headers, dict):
            raise WrongTypeError(f"headers must be a dict or None, not {type(headers).__name__}")
        if headers and not all(isinstance(v, str) for v in (*headers, *headers.values())):
            raise WrongTypeError("headers must map str names to str values")
        if not subject.startswith(self._core.prefix) or len(subject) == len(self._core.prefix):
            raise KeyDecodeError(subject, f"not a key subject of bucket {self._core.name!r}")
        data = value if isinstance(value, bytes) else bytes(value)
        return self._core.entry_of(subject, data, revision, ns_of_time(created), headers or {})


async def _discard(future: asyncio.Future[Any]) -> None:
    """End a read whose answer is no longer needed: cancelled (a read that cannot be answered
    would otherwise be retried until the retry deadline, after the write it went with
    succeeded), then awaited, so it has ended and its outcome is never reported as lost."""
    future.cancel()
    await asyncio.wait([future])
    if not future.cancelled():
        future.exception()
