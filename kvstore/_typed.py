"""Typed views of a bucket (``Bucket.typed(T)``): values are ``T`` instances, stored as JSON or
MessagePack by msgspec; the bytes API underneath keeps every semantic (CAS, TTL, atomic
``put_many``, consistent ``get_many``, watch resume)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Literal, Self, TypeVar

import msgspec

from jetstream import AsyncListing, ClientValidationError, TTLValue
from jetstream._protocol.message import time_of_ns
from jetstream._publish.atomic import DEFAULT_COMMIT_DEADLINE, DEFAULT_MAX_BATCH
from jetstream._resource import AsyncResource, aclose_iterator

from ._errors import ValueDecodeError, ValueEncodeError
from ._keys import checked_pairs
from ._models import Entry, Op
from ._value_problems import decode_problem, encode_problem

if TYPE_CHECKING:
    from ._batch import KeyBatch
    from ._bucket import Bucket
    from ._lease import Lease
    from ._snapshot import Snapshot
    from ._watch import KeyWatcher

__all__ = ["TypedBucket", "TypedEntry", "TypedSnapshot", "TypedWatcher", "ValueFormat"]

T = TypeVar("T")
ValueFormat = Literal["json", "msgpack"]


class TypedEntry(Generic[T]):
    """One revision of a key in a typed view: the fields of :class:`kvstore.Entry`, with
    ``value`` decoded as the view's type.

    ``value`` is None for tombstones, expiry markers and ``meta_only`` watches. A stored value
    that does not decode (only in :meth:`TypedBucket.watch` and :meth:`TypedBucket.history`,
    which keep going) has :attr:`error` set, and reading ``value`` raises that
    :class:`ValueDecodeError`; ``raw`` always holds the stored bytes (empty for tombstones
    and markers). The repr names the value's type, never the value.
    """

    __slots__ = (
        "_value",
        "bucket",
        "created_ns",
        "delta",
        "error",
        "key",
        "op",
        "raw",
        "revision",
        "ttl",
    )

    def __init__(self, entry: Entry, value: T | None, error: ValueDecodeError | None) -> None:
        self.bucket: str = entry.bucket
        self.key: str = entry.key
        self.revision: int = entry.revision
        self.created_ns: int = entry.created_ns
        self.op: Op = entry.op
        self.delta: int | None = entry.delta
        self.ttl: int | None = entry.ttl
        self.raw: bytes = entry.value
        self.error: ValueDecodeError | None = error
        self._value = value

    @property
    def created(self) -> datetime:
        """The server's time of the write (see :attr:`Entry.created`)."""
        return time_of_ns(self.created_ns)

    @property
    def value(self) -> T | None:
        """The decoded value (None for tombstones, markers and ``meta_only``).

        Raises:
            ValueDecodeError: the stored value does not decode (see :attr:`error`).
        """
        if self.error is not None:
            raise self.error
        return self._value

    def __repr__(self) -> str:
        if self.error is not None:
            shown = f"error={self.error}"  # names key, revision and what is wrong, not the value
        elif self._value is None:
            shown = "value=None"
        else:
            shown = f"value=<{_name(type(self._value))}>"
        return f"TypedEntry(key={self.key!r}, revision={self.revision}, op={self.op.name}, {shown})"


class TypedSnapshot(Mapping[str, TypedEntry[T]]):
    """:class:`kvstore.Snapshot` with decoded values: a mapping of key to
    :class:`TypedEntry`, with ``missing`` and ``revision``."""

    __slots__ = ("_entries", "missing", "revision")

    def __init__(self, entries: dict[str, TypedEntry[T]], snapshot: Snapshot) -> None:
        self._entries = entries
        self.missing = snapshot.missing
        self.revision = snapshot.revision

    def __getitem__(self, key: str) -> TypedEntry[T]:
        return self._entries[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"<TypedSnapshot revision={self.revision} keys={list(self)}>"


class TypedBucket(Generic[T]):
    """A bucket whose values are ``T``: get one from :meth:`kvstore.Bucket.typed`::

        class Profile(msgspec.Struct):
            name: str
            age: int

        profiles = bucket.typed(Profile)              # or format="msgpack"
        rev = await profiles.put("alice", Profile("Alice", 30))
        entry = await profiles.get("alice")           # entry.value is a Profile

    Every method has the semantics and errors of the bytes method of the same name, plus:
    writes encode the value and decode it back before sending, so a value that would not read
    back as ``T`` (a Struct field of the wrong type, an unencodable object) raises
    :class:`ValueEncodeError` and nothing is written; ``get`` and ``get_many`` raise
    :class:`ValueDecodeError` (naming key and revision) for a stored value that is not a
    ``T``; ``watch`` and ``history`` deliver such a revision as a :class:`TypedEntry` with
    ``error`` set and keep going. Keys go through the bucket's key codec, if any.
    """

    def __init__(
        self, bucket: Bucket, value_type: type[T], *, format: ValueFormat = "json"
    ) -> None:
        self._bucket = bucket
        self._type = value_type
        self._format = format
        encoder: msgspec.json.Encoder | msgspec.msgpack.Encoder
        decoder: msgspec.json.Decoder[T] | msgspec.msgpack.Decoder[T]
        try:
            if format == "json":
                encoder, decoder = msgspec.json.Encoder(), msgspec.json.Decoder(value_type)
            elif format == "msgpack":
                encoder, decoder = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(value_type)
            else:
                raise ClientValidationError(f"format must be 'json' or 'msgpack', not {format!r}")
        except (TypeError, NameError, AttributeError) as exc:  # NameError: unresolved annotation
            raise ClientValidationError(f"msgspec cannot store {value_type!r}: {exc}") from None
        self._encoder = encoder
        self._decoder = decoder

    @property
    def bucket(self) -> Bucket:
        """The bytes bucket underneath."""
        return self._bucket

    @property
    def value_type(self) -> type[T]:
        """The values' type."""
        return self._type

    @property
    def format(self) -> ValueFormat:
        """``"json"`` or ``"msgpack"``."""
        return self._format

    def __repr__(self) -> str:
        return f"<TypedBucket {self._bucket.name!r} of {self._type!r} as {self._format}>"

    # -- writes -------------------------------------------------------------------------------

    async def put(
        self, key: str, value: T, *, ttl: TTLValue | None = None, fence: Lease | None = None
    ) -> int:
        """Store ``value`` under ``key``; return its revision (see :meth:`Bucket.put`; with
        ``fence=lease`` only while the lease is held).

        Raises:
            ValueEncodeError: ``value`` does not encode as (and decode back to) the type.
            InvalidKeyError, InvalidTTLError, ValueTooLargeError: bad input; nothing is sent.
            LeaseLostError: (``fence``) the lease is not held; nothing stored.
            JetStreamError: as :meth:`Bucket.put`.
        """
        return await self._bucket.put(key, self._encode(key, value), ttl=ttl, fence=fence)

    async def create(self, key: str, value: T, *, ttl: TTLValue | None = None) -> int:
        """Store ``value`` only if ``key`` has no live value (see :meth:`Bucket.create`).

        Raises:
            KeyExistsError: the key has a live value.
            ValueEncodeError, InvalidKeyError, InvalidTTLError, ValueTooLargeError: bad input.
        """
        return await self._bucket.create(key, self._encode(key, value), ttl=ttl)

    async def update(
        self, key: str, value: T, revision: int, *, ttl: TTLValue | None = None
    ) -> int:
        """Store ``value`` only if ``key`` is at ``revision`` (see :meth:`Bucket.update`).

        Raises:
            WrongRevisionError: the latest revision differs.
            ValueEncodeError, InvalidKeyError, InvalidTTLError, ValueTooLargeError: bad input.
            ClientValidationError: ``revision`` is not a positive int.
        """
        return await self._bucket.update(key, self._encode(key, value), revision, ttl=ttl)

    async def delete(
        self, key: str, *, revision: int | None = None, fence: Lease | None = None
    ) -> int:
        """Write a delete tombstone (see :meth:`Bucket.delete`).

        Raises:
            WrongRevisionError, InvalidKeyError, LeaseLostError: as :meth:`Bucket.delete`.
        """
        return await self._bucket.delete(key, revision=revision, fence=fence)

    async def purge(
        self, key: str, *, ttl: TTLValue | None = None, revision: int | None = None
    ) -> int:
        """Remove every revision of ``key`` (see :meth:`Bucket.purge`).

        Raises:
            WrongRevisionError, InvalidKeyError, InvalidTTLError: as :meth:`Bucket.purge`.
        """
        return await self._bucket.purge(key, ttl=ttl, revision=revision)

    async def put_many(
        self,
        items: Mapping[str, T] | Iterable[tuple[str, T]],
        *,
        expect: Mapping[str, int] | None = None,
        ttl: TTLValue | Mapping[str, TTLValue] | None = None,
        max_keys: int = DEFAULT_MAX_BATCH,
        deadline: float = DEFAULT_COMMIT_DEADLINE,
        fence: Lease | None = None,
    ) -> dict[str, int]:
        """Store several keys atomically (see :meth:`Bucket.put_many`); every value is encoded
        before anything is sent.

        Raises:
            ValueEncodeError: a value does not encode as the type (nothing is sent).
            InvalidKeyError, InvalidTTLError, ValueTooLargeError, BatchTooLargeError,
            WrongRevisionError, KeyExistsError, CommitUnknownError, WrongTypeError,
            ClientValidationError, LeaseLostError: as :meth:`Bucket.put_many`.
        """
        batch = self.prepare_many(
            items, expect=expect, ttl=ttl, max_keys=max_keys, deadline=deadline, fence=fence
        )
        return await batch.commit()

    def prepare_many(
        self,
        items: Mapping[str, T] | Iterable[tuple[str, T]],
        *,
        expect: Mapping[str, int] | None = None,
        ttl: TTLValue | Mapping[str, TTLValue] | None = None,
        max_keys: int = DEFAULT_MAX_BATCH,
        deadline: float = DEFAULT_COMMIT_DEADLINE,
        fence: Lease | None = None,
    ) -> KeyBatch:
        """What :meth:`put_many` would send, encoded, checked and queued but not sent (see
        :meth:`Bucket.prepare_many`): ``await batch.commit()`` stores it.

        Raises:
            ValueEncodeError: a value does not encode as the type.
            As :meth:`Bucket.prepare_many` otherwise (nothing is sent).
        """
        encoded = [(key, self._encode(key, value)) for key, value in checked_pairs(items)]
        return self._bucket.prepare_many(
            encoded, expect=expect, ttl=ttl, max_keys=max_keys, deadline=deadline, fence=fence
        )

    # -- reads --------------------------------------------------------------------------------

    async def get(self, key: str, *, revision: int | None = None) -> TypedEntry[T]:
        """The live value of ``key`` (or of ``revision``), decoded (see :meth:`Bucket.get`).

        Raises:
            ValueDecodeError: the stored value is not a ``T`` (names key and revision).
            KeyNotFoundError, InvalidKeyError: as :meth:`Bucket.get`.
        """
        return self._checked(self._typed(await self._bucket.get(key, revision=revision)))

    async def get_many(self, keys: Iterable[str]) -> TypedSnapshot[T]:
        """Several keys as of one point in time, decoded (see :meth:`Bucket.get_many`).

        Raises:
            ValueDecodeError: a stored value is not a ``T`` (the first one found).
            InvalidKeyError, JetStreamError: as :meth:`Bucket.get_many`.
        """
        snapshot = await self._bucket.get_many(keys)
        entries = {key: self._checked(self._typed(entry)) for key, entry in snapshot.items()}
        return TypedSnapshot(entries, snapshot)

    def keys(self, filters: str | list[str] = ">") -> AsyncListing[str]:
        """Keys with a live value (see :meth:`Bucket.keys`): ``async for`` or ``await``.

        Raises:
            InvalidKeyError, FilterNotSupportedError: a bad filter.
        """
        return self._bucket.keys(filters)

    def history(self, key: str) -> AsyncListing[TypedEntry[T]]:
        """Every stored revision of ``key``, oldest first (see :meth:`Bucket.history`): ``async
        for`` or ``await``; a value that does not decode is delivered with ``error`` set.

        Raises:
            InvalidKeyError: a bad key.
            KeyNotFoundError: the key has no stored revision (raised at the end).
        """
        return AsyncListing(_TypedHistory(self, self._bucket.history(key)))  # key checked now

    def watch(
        self,
        keys: str | list[str] = ">",
        *,
        include_history: bool = False,
        updates_only: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        resume_from: int | None = None,
    ) -> TypedWatcher[T]:
        """Watch keys with decoded values (see :meth:`Bucket.watch`); a value that does not
        decode arrives as a :class:`TypedEntry` with ``error`` set, and the watch goes on.

        Raises:
            InvalidKeyError, FilterNotSupportedError, ClientValidationError: as
                :meth:`Bucket.watch`.
        """
        watcher = self._bucket.watch(
            keys,
            include_history=include_history,
            updates_only=updates_only,
            ignore_deletes=ignore_deletes,
            meta_only=meta_only,
            resume_from=resume_from,
        )
        return TypedWatcher(self, watcher, decode=not meta_only)

    # -- internals ----------------------------------------------------------------------------

    def _encode(self, key: str, value: T) -> bytes:
        """``value`` as stored bytes, checked to decode back as the type (a Struct built with a
        field of the wrong type encodes fine but would never read back)."""
        # Any exception of msgspec's or of the type's own code (a __post_init__ asserting on a
        # field) is the value's fault, so it names the key; only a MemoryError is the
        # process's and stays as it is. The original's text may quote the value (a secret,
        # in an encrypted bucket): the error says what is wrong without it, and is raised
        # outside the handler so that nothing chains the original. Decoding, likewise.
        try:
            data = self._encoder.encode(value)
        except MemoryError:
            raise
        except Exception as exc:
            problem = encode_problem(exc, self._format)
        else:
            unreadable = self._decoded(data)[1]
            if unreadable is None:
                return data
            problem = unreadable
        raise ValueEncodeError(f"value for key {key!r} is {self._not_a(problem)}")

    def _typed(self, entry: Entry, *, decode: bool = True) -> TypedEntry[T]:
        if entry.op is not Op.PUT or not decode:
            return TypedEntry(entry, None, None)
        value, problem = self._decoded(entry.value)
        if problem is None:
            return TypedEntry(entry, value, None)
        # reported on the entry: a watch goes on
        error = ValueDecodeError(entry.key, entry.revision, self._not_a(problem), entry.value)
        return TypedEntry(entry, None, error)

    def _decoded(self, data: bytes) -> tuple[T | None, str | None]:
        """The value ``data`` holds, or None and what is wrong with it (never quoting it)."""
        try:
            return self._decoder.decode(data), None
        except MemoryError:
            raise
        except Exception as exc:
            return None, decode_problem(exc, _name(self._type), self._format)

    def _not_a(self, problem: str) -> str:
        return f"not a {_name(self._type)} ({self._format}): {problem}"

    @staticmethod
    def _checked(entry: TypedEntry[T]) -> TypedEntry[T]:
        if entry.error is not None:
            raise entry.error
        return entry


class TypedWatcher(AsyncResource, Generic[T]):
    """A :class:`kvstore.KeyWatcher` delivering :class:`TypedEntry` items; use it the same
    way (``async with``, ``async for``, :meth:`initial`, :attr:`initial_done`, :meth:`stop`)."""

    def __init__(self, view: TypedBucket[T], watcher: KeyWatcher, *, decode: bool) -> None:
        self._view = view
        self._watcher = watcher
        self._decode = decode
        self.initial_done = watcher.initial_done
        """Set once the initial values (or history) have been delivered."""

    @property
    def resets(self) -> int:
        """See :attr:`kvstore.KeyWatcher.resets`."""
        return self._watcher.resets

    @property
    def skipped(self) -> int:
        """See :attr:`kvstore.KeyWatcher.skipped`."""
        return self._watcher.skipped

    def initial(self) -> AsyncListing[TypedEntry[T]]:
        """The snapshot part, as :meth:`kvstore.KeyWatcher.initial` (entries typed).

        Raises:
            JetStreamError: as iteration does.
        """
        return AsyncListing(self._initial())

    async def _initial(self) -> AsyncIterator[TypedEntry[T]]:
        async for entry in self._watcher.initial():
            yield self._view._typed(entry, decode=self._decode)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> TypedEntry[T]:
        entry = await self._watcher.__anext__()
        return self._view._typed(entry, decode=self._decode)

    async def stop(self) -> None:
        """Stop watching and delete the consumer."""
        await self._watcher.stop()

    async def _enter(self) -> None:
        await self._watcher._enter()

    async def _exit(self, error: BaseException | None) -> None:
        await self._watcher.stop()


class _TypedHistory(Generic[T]):
    """:meth:`Bucket.history` with decoded values; like it, it goes on after a revision that
    does not open (an async generator would end at the first exception passing through)."""

    def __init__(self, view: TypedBucket[T], entries: AsyncIterator[Entry]) -> None:
        self._view = view
        self._entries = entries

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> TypedEntry[T]:
        return self._view._typed(await self._entries.__anext__())

    async def aclose(self) -> None:
        """Stop reading (as an async generator's ``aclose``: ``contextlib.aclosing`` works)."""
        await aclose_iterator(self._entries)


def _name(value_type: Any) -> str:
    return getattr(value_type, "__name__", None) or repr(value_type)
