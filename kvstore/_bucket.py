"""Bucket: reads and writes of one KV bucket, with per-key TTL and compare-and-set."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from nats.nuid import NUID

from jetstream import (
    NEVER,
    ClientValidationError,
    DecryptionError,
    InvalidTTLError,
    JetStream,
    Keyring,
    MessageNotFoundError,
    RekeyReport,
    StoredMessage,
    TTLValue,
    UndecodableMessageError,
    ValueTooLargeError,
    WrongLastSequenceError,
    WrongTypeError,
)
from jetstream import headers as hdr
from jetstream._crypto.envelope import OVERHEAD
from jetstream._errors import check_bytes_like
from jetstream._protocol.limits import subject_room
from jetstream._protocol.ttl import format_ttl, parse_ttl_at_least, parse_ttl_header
from jetstream._publish.atomic import DEFAULT_COMMIT_DEADLINE, DEFAULT_MAX_BATCH

from ._batch import KeyBatch
from ._codecs import KeyCodec, encode_filter
from ._compact import compact_deletes
from ._encryption import EncryptionStage
from ._errors import (
    InvalidKeyError,
    KeyDecodeError,
    KeyExistsError,
    KeyNotFoundError,
    WrongRevisionError,
)
from ._keys import (
    checked_filters,
    checked_pairs,
    distinct_filters,
    validate_filter,
    validate_key,
    validate_revision,
)
from ._missing import missing_bucket
from ._models import (
    BucketConfig,
    BucketStatus,
    Entry,
    Op,
    bucket_config_from_stream,
    op_from_headers,
    stream_name,
    subject_prefix,
)
from ._name_codec import NEW_NAME_FORMAT, bind_key_codec
from ._own_writes import OwnWrites
from ._rekey import rekey_bucket
from ._snapshot import Snapshot, read_snapshot
from ._stages import ValueContext, ValueStage
from ._typed import TypedBucket, ValueFormat
from ._watch import History, KeyWatcher, iter_keys, watch_subjects

__all__ = ["Bucket", "BytesLike"]

T = TypeVar("T")

BytesLike = bytes | bytearray | memoryview

_CREATE_ATTEMPTS = 3
_CONTENDED_KEYS = 1024  # keys remembered as refused by create (a bounded LRU)
_CONSUMER_NAME_ROOM = 40  # generated consumer names: a NUID and a serial
_DEFAULT_PURGE_DELETES_AGE = timedelta(minutes=30)
_log = logging.getLogger("kvstore")


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
        self._js = js
        # An EncryptedKeyCodec seals names for this bucket, in the format its stream records.
        self._key_codec = (
            None if key_codec is None else bind_key_codec(key_codec, name, name_format)
        )
        # The seam for value transforms: see _stages.py. Encryption is the last stage on a
        # write (it seals what every other stage produced) and the first on a read.
        self._encryption = encryption
        self._value_stages: tuple[ValueStage, ...] = (
            *value_stages,
            *((encryption,) if encryption is not None else ()),
        )
        # Encryption alone (every encrypted bucket today) seals without a ValueContext per
        # value: put_many's cost goal counts every microsecond per value.
        self._sole_encryption = encryption if not value_stages else None
        self._direct = direct  # buckets made by nats-py lack allow_direct
        self._name = name
        self._config = config
        self._stream = stream_name(name)
        self._prefix = subject_prefix(name)
        self._max_key_length: tuple[int, int] | None = None  # (max_payload, its key limit)
        self._contended: OrderedDict[str, None] = OrderedDict()  # keys create found taken
        self._own_writes = OwnWrites()  # so this handle's reads never predate its writes
        # Every operation that reaches the server runs in it: a bucket deleted by anyone is
        # BucketNotFoundError naming it, whatever the server answered (10059, or a 503).
        self._missing = missing_bucket(js, name)

    @property
    def name(self) -> str:
        """The bucket name."""
        return self._name

    @property
    def stream(self) -> str:
        """The backing stream, ``KV_<name>``."""
        return self._stream

    @property
    def js(self) -> JetStream:
        """The JetStream context this handle reads and writes through."""
        return self._js

    @property
    def key_codec(self) -> KeyCodec | None:
        """The key codec every key and filter goes through (None: keys are stored as given);
        an :class:`EncryptedKeyCodec` given to the bucket is bound to it here."""
        return self._key_codec

    @property
    def encryption(self) -> Keyring | None:
        """The keyring values are encrypted with (None: values are stored as given)."""
        return None if self._encryption is None else self._encryption.keyring

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
        return self._config

    @property
    def max_key_length(self) -> int:
        """The longest key (or key filter) this bucket accepts on this connection.

        Every request naming a key must fit the server's control line (4096 bytes by default;
        a longer one makes the server close the connection): the longest is a watch's
        filtered consumer create, ``$JS.API.CONSUMER.CREATE.<stream>.<name>.$KV.<bucket>.<key>``
        with its reply inbox and size. Longer keys raise :class:`InvalidKeyError`.
        """
        nc = self._js.nc
        cached = self._max_key_length
        if cached is None or cached[0] != nc.max_payload:  # another server may say otherwise
            api = self._js.api.consumer_create(
                self._stream, "n" * _CONSUMER_NAME_ROOM, self._prefix
            )
            cached = self._max_key_length = (nc.max_payload, subject_room(nc) - len(api))
        return cached[1]

    def __repr__(self) -> str:
        codec = f" key_codec={self._key_codec!r}" if self._key_codec is not None else ""
        enc = f" encryption={self._encryption.keyring!r}" if self._encryption is not None else ""
        return f"<Bucket {self._name!r} history={self._config.history}{codec}{enc}>"

    # -- writes -------------------------------------------------------------------------------

    async def put(self, key: str, value: BytesLike, *, ttl: TTLValue | None = None) -> int:
        """Store ``value`` under ``key``; return its revision.

        Raises:
            InvalidKeyError, InvalidTTLError, ValueTooLargeError: bad input; nothing is sent.
                A TTL below the bucket's ``marker_ttl`` is refused when history > 1; a key
                longer than :attr:`max_key_length`, or a value that with its headers exceeds
                the server's ``max_payload``, is refused (the server would drop the connection).
            WrongTypeError: ``value`` is not bytes-like.
            StorageLimitError: the bucket is full (``max_bytes``).
            BucketNotFoundError: the bucket was deleted (by any client).
            JetStreamError: any other server error.
        """
        return await self._write(key, value, self._ttl_headers(ttl))

    async def create(self, key: str, value: BytesLike, *, ttl: TTLValue | None = None) -> int:
        """Store ``value`` only if ``key`` has no live value; return its revision.

        Succeeds over a delete or purge tombstone and over an expiry marker, as nats.go does.

        Raises:
            KeyExistsError: the key has a live value (``.revision`` is its revision).
            InvalidKeyError, InvalidTTLError, ValueTooLargeError, WrongTypeError: bad input.
            BucketNotFoundError: the bucket was deleted (by any client).
        """
        headers = self._ttl_headers(ttl)
        for _ in range(_CREATE_ATTEMPTS):
            # On a key whose last create was refused (a lock someone holds), the key's last
            # message is asked for alongside the write: a refusal then needs no second round
            # trip to tell a live value from a tombstone. A read served before a write that
            # then refused ours (older than the sequence the refusal names) is asked again.
            peek = (
                asyncio.ensure_future(self._last_message_or_none(key))
                if key in self._contended
                else None
            )
            try:
                revision = await self._write(key, value, _expect(headers, 0))
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
                last = await self._last_message_or_none(key, at_least=error.last_sequence or 0)
            if last is None:
                continue  # the blocking value expired meanwhile: try again from scratch
            if op_from_headers(last.headers) is Op.PUT:
                self._note_contended(key)
                raise KeyExistsError(key, last.seq, err_code=error.err_code) from error
            try:
                return await self._write(key, value, _expect(headers, last.seq))
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
        return await self._write_expecting(key, value, self._ttl_headers(ttl), revision)

    async def delete(self, key: str, *, revision: int | None = None) -> int:
        """Write a delete tombstone (history is kept); return its revision.

        With ``revision``, only if that is the key's latest revision.

        Raises:
            WrongRevisionError: ``revision`` was given and is not the latest.
            InvalidKeyError: bad key.
            BucketNotFoundError: the bucket was deleted (by any client).
        """
        headers = self._delete_headers()
        if revision is None:
            return await self._write(key, b"", headers)
        validate_revision(revision, allow_zero=True)
        return await self._write_expecting(key, b"", headers, revision)

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
        headers = self._purge_headers(ttl)
        if revision is None:
            return await self._write(key, b"", headers)
        validate_revision(revision, allow_zero=True)
        return await self._write_expecting(key, b"", headers, revision)

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
        async with self._missing:
            return await compact_deletes(self, older_than)

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
        if self._encryption is None:
            raise ClientValidationError(f"bucket {self._name!r} was opened without encryption=")
        async with self._missing:
            return await rekey_bucket(self, self._encryption)

    # -- atomic multi-key writes --------------------------------------------------------------

    def batch(
        self,
        *,
        max_keys: int = DEFAULT_MAX_BATCH,
        timeout: float | None = None,
        deadline: float = DEFAULT_COMMIT_DEADLINE,
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
        See :class:`KeyBatch`.
        """
        return KeyBatch(self, max_keys=max_keys, timeout=timeout, deadline=deadline)

    async def put_many(
        self,
        items: Mapping[str, BytesLike] | Iterable[tuple[str, BytesLike]],
        *,
        expect: Mapping[str, int] | None = None,
        ttl: TTLValue | Mapping[str, TTLValue] | None = None,
        max_keys: int = DEFAULT_MAX_BATCH,
        deadline: float = DEFAULT_COMMIT_DEADLINE,
    ) -> dict[str, int]:
        """Store several keys atomically: all of them or none. Returns ``{key: revision}``.

        ``expect`` maps keys to the revision they must have (0 = no live value, as
        :meth:`create`); ``ttl`` is one TTL for every key or a mapping of per-key TTLs. A key
        may appear once. Everything is validated before anything is sent.

        Raises:
            InvalidKeyError: a bad key, a repeated key, or an ``expect``/``ttl`` key not written.
            InvalidTTLError, ValueTooLargeError, WrongTypeError: bad TTLs or values, or
                ``items`` neither a mapping nor (key, value) pairs.
            ClientValidationError: ``max_keys`` or ``deadline`` out of range.
            BatchTooLargeError: more than ``max_keys`` keys.
            WrongRevisionError, KeyExistsError: an ``expect`` condition failed; names the key.
            CommitUnknownError: the outcome could not be learned before the deadline.
            BucketNotFoundError: the bucket was deleted (by any client).
        """
        batch = self.prepare_many(
            items, expect=expect, ttl=ttl, max_keys=max_keys, deadline=deadline
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
        batch = self.batch(max_keys=max_keys, deadline=deadline)
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
        async with self._missing:
            return await read_snapshot(self, keys)

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
            self,
            keys,
            include_history=include_history,
            updates_only=updates_only,
            ignore_deletes=ignore_deletes,
            meta_only=meta_only,
            resume_from=resume_from,
        )

    def keys(self, filters: str | list[str] = ">") -> AsyncIterator[str]:
        """Keys that have a live value, optionally matching filters (filtered by the server).

        Raises:
            InvalidKeyError: a bad filter (as a codec stores it).
            FilterNotSupportedError: a wildcard the key codec cannot encode.
            BucketNotFoundError: (iterating) the bucket was deleted, also while it ran.
        """
        return iter_keys(self, watch_subjects(self, filters))

    def history(self, key: str) -> AsyncIterator[Entry]:
        """Every stored revision of ``key``, oldest first (tombstones and markers included).

        Raises:
            InvalidKeyError: a bad key.
            KeyNotFoundError: the key has no stored revision (raised at the end).
            DecryptionError: (encrypted bucket) a revision does not open; iterate again to go
                on with the next one.
            BucketNotFoundError: (iterating) the bucket was deleted, also while it ran.
        """
        return History(self, key, self._subject(key))

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
                message = await self._last_message(key)
            except MessageNotFoundError as exc:
                raise KeyNotFoundError(key) from exc
        else:
            validate_revision(revision, allow_zero=False)
            message = await self._message_at(key, revision)
        entry = self._entry(message)
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
        async with self._missing:
            info = await self._js.stream_info(self._stream)
        return BucketStatus(
            bucket=self._name,
            values=info.state.messages,
            bytes=info.state.bytes,
            config=bucket_config_from_stream(info.config),
            stream_info=info,
        )

    # -- internals ----------------------------------------------------------------------------

    def _subject(self, key: str) -> str:
        """The subject of a user key: encoded by the key codec, then checked against the KV
        key rules and the longest key the server's control line holds."""
        codec = self._key_codec
        if codec is None:
            validate_key(key, max_length=self.max_key_length)
            return self._prefix + key
        stored = codec.encode_key(key)
        try:
            validate_key(stored, max_length=self.max_key_length)
        except InvalidKeyError as exc:
            raise InvalidKeyError(f"key {key!r}, stored as {stored!r}: {exc}") from None
        return self._prefix + stored

    def _filter_subjects(self, filters: str | list[str]) -> list[str]:
        """The subjects of user key filters (encoded by the key codec where it can)."""
        patterns = checked_filters(filters)
        if not patterns:
            raise ClientValidationError("a key filter list needs at least one filter")
        longest = self.max_key_length
        stored_patterns = []
        for pattern in patterns:
            stored = pattern if self._key_codec is None else encode_filter(self._key_codec, pattern)
            try:
                validate_filter(stored, max_length=longest)
            except InvalidKeyError as exc:
                if stored is pattern:
                    raise
                raise InvalidKeyError(f"filter {pattern!r}, stored as {stored!r}: {exc}") from None
            stored_patterns.append(stored)
        return [self._prefix + stored for stored in distinct_filters(stored_patterns)]

    def _decode_key(self, stored: str) -> str:
        """The user key of a stored key.

        Raises:
            KeyDecodeError: the codec cannot decode it (written without the codec).
        """
        codec = self._key_codec
        if codec is None:
            return stored
        try:
            return codec.decode_key(stored)
        except KeyDecodeError:
            raise
        except Exception as exc:  # a custom codec's own error: reported (and skipped) as ours
            raise KeyDecodeError(stored, f"{codec!r} failed: {exc!r}") from exc

    def _ttl_headers(self, ttl: TTLValue | None) -> dict[str, str]:
        if ttl is None:
            return {}
        seconds = self._checked_ttl(ttl)
        headers = {hdr.TTL: format_ttl(seconds)}
        if self._config.history > 1 and seconds != NEVER:
            headers[hdr.ROLLUP] = hdr.ROLLUP_SUBJECT  # a key TTL, not a revision TTL
        return headers

    def _delete_headers(self) -> dict[str, str]:
        return {hdr.KV_OPERATION: hdr.KV_OPERATION_DELETE}

    def _purge_headers(self, ttl: TTLValue | None) -> dict[str, str]:
        headers = {hdr.KV_OPERATION: hdr.KV_OPERATION_PURGE, hdr.ROLLUP: hdr.ROLLUP_SUBJECT}
        if ttl is not None:
            headers[hdr.TTL] = format_ttl(self._checked_ttl(ttl))
        return headers

    def _checked_ttl(self, ttl: TTLValue) -> int:
        # With one revision per key the server does not stretch TTLs to marker_ttl.
        floor = self._config.marker_ttl if self._config.history > 1 else None
        return parse_ttl_at_least(ttl, floor, owner=f"bucket {self._name!r}")

    @staticmethod
    def _stored_ttl(headers: dict[str, str]) -> int | None:
        text = headers.get(hdr.TTL)
        if not text:
            return None
        try:
            return parse_ttl_header(text)
        except InvalidTTLError:
            return None

    def _payload(self, value: BytesLike) -> bytes:
        data = bytes(check_bytes_like(value, "value"))
        limit = self._config.max_value_size
        if limit > 0 and len(data) > limit:
            raise ValueTooLargeError(f"value of {len(data)} bytes exceeds max_value_size {limit}")
        max_payload = self._js.nc.max_payload
        if max_payload and len(data) > max_payload:  # fail early; the whole message is
            raise ValueTooLargeError(  # checked (with its headers) before it is sent
                f"value of {len(data)} bytes exceeds the server's max payload {max_payload}"
            )
        return data

    async def _write(self, key: str, value: BytesLike, headers: dict[str, str]) -> int:
        """One write, idempotent through a ``Nats-Msg-Id``: a lost ack is retried until the
        context's ``retry_deadline`` and never stores the value twice."""
        subject = self._subject(key)
        data = self._payload(value)
        if self._value_stages:
            headers = dict(headers)  # a stage may add headers of its own
            data = self._seal(subject, data, headers)
        msg_id = NUID().next().decode()
        async with self._missing:
            ack = await self._js.publish(subject, data, headers=headers, msg_id=msg_id)
        self._own_writes.note(subject, ack.seq)
        return ack.seq

    def _seal(self, subject: str, data: bytes, headers: dict[str, str]) -> bytes:
        """``data`` through the value stages, first to last (tombstones stay plain)."""
        if not self._value_stages or hdr.KV_OPERATION in headers:
            return data
        stored_key = subject[len(self._prefix) :]
        if self._sole_encryption is not None:
            return self._sole_encryption.seal_value(self._name, stored_key, data, headers)
        context = ValueContext(self._name, stored_key, headers)
        for stage in self._value_stages:
            data = stage.seal(data, context)
        return data

    def _defer_seal(self, headers: dict[str, str]) -> bool:
        """Whether a batched value can be sealed later, while the batch is sent (only the
        bucket's encryption: its payload size and headers are known before it seals); if so,
        ``headers`` gets its ``Jetstore-Enc`` header now."""
        if self._sole_encryption is None:
            return False
        headers[hdr.ENCRYPTION] = self._sole_encryption.header
        return True

    def _seal_deferred(self, subject: str, data: bytes) -> bytes:
        """The payload of a value :meth:`_defer_seal` kept plain, sealed as it is sent."""
        assert self._sole_encryption is not None
        stored_key = subject[len(self._prefix) :]
        return self._sole_encryption.seal_payload(self._name, stored_key, data)

    @property
    def _seal_overhead(self) -> int:
        return OVERHEAD if self._sole_encryption is not None else 0

    def _open(self, subject: str, data: bytes, headers: dict[str, str], revision: int) -> bytes:
        """A stored value through the value stages, last to first."""
        stored_key = subject[len(self._prefix) :]
        if self._sole_encryption is not None:
            return self._sole_encryption.open_value(self._name, stored_key, data, headers, revision)
        context = ValueContext(self._name, stored_key, headers, revision)
        for stage in reversed(self._value_stages):
            data = stage.open(data, context)
        return data

    async def _write_expecting(
        self, key: str, value: BytesLike, headers: dict[str, str], revision: int
    ) -> int:
        try:
            return await self._write(key, value, _expect(headers, revision))
        except WrongLastSequenceError as exc:
            current = exc.last_sequence
            if current is None:
                current = await self._latest_revision(key)
            raise WrongRevisionError(key, revision, current, err_code=exc.err_code) from exc

    async def _latest_revision(self, key: str) -> int:
        try:
            return (await self._last_message(key)).seq
        except MessageNotFoundError:
            return 0

    def _note_contended(self, key: str) -> None:
        self._contended[key] = None
        self._contended.move_to_end(key)
        if len(self._contended) > _CONTENDED_KEYS:
            self._contended.popitem(last=False)

    async def _last_message_or_none(self, key: str, *, at_least: int = 0) -> StoredMessage | None:
        try:
            return await self._last_message(key, at_least=at_least)
        except MessageNotFoundError:
            return None

    async def _last_message(self, key: str, *, at_least: int = 0) -> StoredMessage:
        """The newest message of ``key``, never older than this handle's own write of it nor
        than ``at_least`` (a revision the server named): a replica that answers before it has
        caught up is overruled by the stream leader."""
        subject = self._subject(key)
        async with self._missing:
            if not self._direct:
                return await self._js.get_last_message(self._stream, subject, direct=False)
            floor = max(self._own_writes.revision(subject), at_least)
            try:
                message = await self._js.get_last_message(self._stream, subject)
            except MessageNotFoundError:
                if not floor:
                    raise
            else:
                if message.seq >= floor:
                    return message
            return await self._js.get_last_message(self._stream, subject, direct=False)

    async def _message_at(self, key: str, revision: int) -> StoredMessage:
        subject = self._subject(key)
        try:
            message = await self._stored_message(revision)
        except MessageNotFoundError as exc:
            raise KeyNotFoundError(key, f"key {key!r} has no revision {revision}") from exc
        except UndecodableMessageError:  # a subject that is not UTF-8 is no key's
            message = None
        if message is None or message.subject != subject:
            raise KeyNotFoundError(key, f"revision {revision} is not a revision of key {key!r}")
        return message

    async def _stored_message(self, revision: int) -> StoredMessage:
        """The message at ``revision``; a replica that lacks it (it may trail the leader) is
        overruled by the stream leader before the revision is called missing."""
        async with self._missing:
            try:
                return await self._js.get_message(self._stream, revision, direct=self._direct)
            except MessageNotFoundError:
                if not self._direct:
                    raise
            return await self._js.get_message(self._stream, revision, direct=False)

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
            WrongTypeError: ``subject`` is not a str, ``value`` not bytes-like, or ``headers``
                neither a dict of str to str nor None (nats-py's ``Msg.headers`` for a
                message without).
        """
        if not isinstance(subject, str):
            raise WrongTypeError(f"subject must be a str, not {type(subject).__name__}")
        check_bytes_like(value, "value")
        if headers is not None and not isinstance(headers, dict):
            raise WrongTypeError(f"headers must be a dict or None, not {type(headers).__name__}")
        if headers and not all(isinstance(v, str) for v in (*headers, *headers.values())):
            raise WrongTypeError("headers must map str names to str values")
        if not subject.startswith(self._prefix) or len(subject) == len(self._prefix):
            raise KeyDecodeError(subject, f"not a key subject of bucket {self._name!r}")
        data = value if isinstance(value, bytes) else bytes(value)
        return self._entry_of(subject, data, revision, created, headers or {})

    def _entry(self, message: StoredMessage) -> Entry:
        return self._entry_of(
            message.subject, message.data, message.seq, message.time, message.headers
        )

    def _entry_of(
        self,
        subject: str,
        value: bytes,
        revision: int,
        created: datetime,
        headers: dict[str, str],
        delta: int | None = None,
        *,
        headers_only: bool = False,
    ) -> Entry:
        """The entry a stored message (get) or a delivered one (watch, history) stands for;
        ``headers_only``: a delivery without its value (a ``meta_only`` watch), not opened.
        Tombstones and markers have an empty value, whatever payload their message has.

        Only the caller knows that it asked for no values: a ``Nats-Msg-Size`` header can be
        stored by any client, and taking it for the sign made a plain value slipped into an
        encrypted bucket read as if it had been decrypted."""
        op = op_from_headers(headers)
        key = self._decode_key(subject[len(self._prefix) :])
        if op is not Op.PUT:
            # A tombstone or marker has no value. A peer may still send one with a payload,
            # which no stage opens (in an encrypted bucket it is unauthenticated): never
            # shown as if it were the key's value.
            value = b""
        elif self._value_stages and not headers_only:
            try:
                value = self._open(subject, value, headers, revision)
            except DecryptionError as exc:
                exc.key = key  # the stage knows the stored key; callers name the user key
                raise
        return Entry(
            bucket=self._name,
            key=key,
            value=value,
            revision=revision,
            created=created,
            op=op,
            delta=delta,
            ttl=self._stored_ttl(headers) if hdr.TTL in headers else None,
        )


def _expect(headers: dict[str, str], revision: int) -> dict[str, str]:
    return {**headers, hdr.EXPECTED_LAST_SUBJECT_SEQUENCE: str(revision)}


async def _discard(future: asyncio.Future[Any]) -> None:
    """End a read whose answer is no longer needed: cancelled (a read that cannot be answered
    would otherwise be retried until the retry deadline, after the write it went with
    succeeded), then awaited, so it has ended and its outcome is never reported as lost."""
    future.cancel()
    await asyncio.wait([future])
    if not future.cancelled():
        future.exception()
