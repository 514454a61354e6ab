"""Blocking twins of kvstore: the same names, arguments, results and errors, without ``async``.

::

    import jetstream.sync, kvstore.sync

    with jetstream.sync.connect(url) as js:
        bucket = kvstore.sync.create_bucket(js, "profiles", history=5)
        rev = bucket.put("alice.name", b"Alice", ttl="1h")
        with bucket.batch() as batch:                  # commits on exit, abandons on error
            batch.put("alice.city", b"Paris")
        for key in bucket.keys("alice.>"): ...
        with bucket.watch("alice.>") as watcher:
            for entry in watcher: ...

Each handle drives its async twin (``.aio``) on the connection's loop thread (see
:mod:`jetstream.sync`): share it between threads freely. Iterators (``keys``, ``history``,
``list_buckets``, a watch) stop what they hold open on the server when left early.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from jetstream import Keyring, RekeyReport, TTLValue
from jetstream._blocking.portal import Portal, ReadAheadIterator
from jetstream._publish.atomic import DEFAULT_COMMIT_DEADLINE, DEFAULT_MAX_BATCH
from jetstream.sync import JetStream

from . import _batch, _bucket, _election, _lease, _manage, _typed, _watch
from ._codecs import KeyCodec
from ._core import BytesLike
from ._models import BucketConfig, BucketStatus, Entry
from ._snapshot import Snapshot
from ._typed import TypedEntry, TypedSnapshot, ValueFormat

if TYPE_CHECKING:
    from typing import Unpack

    from ._manage import BucketOptions

__all__ = [
    "Bucket",
    "Election",
    "KeyBatch",
    "KeyWatcher",
    "Lease",
    "TypedBucket",
    "TypedWatcher",
    "create_bucket",
    "delete_bucket",
    "list_buckets",
    "open_bucket",
    "update_bucket",
]

T = TypeVar("T")
E = TypeVar("E")


def create_bucket(
    js: JetStream,
    bucket: str,
    config: BucketConfig | None = None,
    *,
    key_codec: KeyCodec | None = None,
    encryption: Keyring | None = None,
    allow_plaintext: bool = False,
    **options: Unpack[BucketOptions],
) -> Bucket:
    """Blocking :func:`kvstore.create_bucket` (same options and errors)."""
    made = _manage.create_bucket(
        js.aio,
        bucket,
        config,
        key_codec=key_codec,
        encryption=encryption,
        allow_plaintext=allow_plaintext,
        **options,
    )
    return Bucket(js.portal.call(made), js)


def open_bucket(
    js: JetStream,
    bucket: str,
    *,
    key_codec: KeyCodec | None = None,
    encryption: Keyring | None = None,
    allow_plaintext: bool = False,
) -> Bucket:
    """Blocking :func:`kvstore.open_bucket` (same errors)."""
    opened = _manage.open_bucket(
        js.aio, bucket, key_codec=key_codec, encryption=encryption, allow_plaintext=allow_plaintext
    )
    return Bucket(js.portal.call(opened), js)


def update_bucket(
    js: JetStream,
    bucket: str,
    config: BucketConfig | None = None,
    **options: Unpack[BucketOptions],
) -> Bucket:
    """Blocking :func:`kvstore.update_bucket` (same options and errors)."""
    return Bucket(js.portal.call(_manage.update_bucket(js.aio, bucket, config, **options)), js)


def delete_bucket(js: JetStream, bucket: str) -> None:
    """Blocking :func:`kvstore.delete_bucket` (same errors)."""
    js.portal.call(_manage.delete_bucket(js.aio, bucket))


def list_buckets(js: JetStream) -> Iterator[str]:
    """Blocking :func:`kvstore.list_buckets`: the bucket names, as a plain iterator."""
    return ReadAheadIterator(js.portal, _manage.list_buckets(js.aio))


class Bucket:
    """A KV bucket whose calls block (:class:`kvstore.Bucket`; ``aio`` is that twin)."""

    def __init__(self, bucket: _bucket.Bucket, js: JetStream) -> None:
        self.aio = bucket
        self.portal: Portal = js.portal
        self._js = js

    @property
    def js(self) -> JetStream:
        """The blocking context this bucket was opened with."""
        return self._js

    @property
    def name(self) -> str:
        """The bucket's name."""
        return self.aio.name

    @property
    def stream(self) -> str:
        """The bucket's stream (``KV_<name>``)."""
        return self.aio.stream

    @property
    def config(self) -> BucketConfig:
        """As :attr:`kvstore.Bucket.config`."""
        return self.aio.config

    @property
    def encryption(self) -> Keyring | None:
        """As :attr:`kvstore.Bucket.encryption`."""
        return self.aio.encryption

    @property
    def key_codec(self) -> KeyCodec | None:
        """As :attr:`kvstore.Bucket.key_codec`."""
        return self.aio.key_codec

    @property
    def max_key_length(self) -> int:
        """As :attr:`kvstore.Bucket.max_key_length`."""
        return self.aio.max_key_length

    def put(
        self,
        key: str,
        value: BytesLike,
        *,
        ttl: TTLValue | None = None,
        fence: Lease | None = None,
    ) -> int:
        """Blocking :meth:`kvstore.Bucket.put` (same errors)."""
        return self.portal.call(self.aio.put(key, value, ttl=ttl, fence=_aio(fence)))

    def create(self, key: str, value: BytesLike, *, ttl: TTLValue | None = None) -> int:
        """Blocking :meth:`kvstore.Bucket.create` (same errors)."""
        return self.portal.call(self.aio.create(key, value, ttl=ttl))

    def update(
        self, key: str, value: BytesLike, revision: int, *, ttl: TTLValue | None = None
    ) -> int:
        """Blocking :meth:`kvstore.Bucket.update` (same errors)."""
        return self.portal.call(self.aio.update(key, value, revision, ttl=ttl))

    def get(self, key: str, *, revision: int | None = None) -> Entry:
        """Blocking :meth:`kvstore.Bucket.get` (same errors)."""
        return self.portal.call(self.aio.get(key, revision=revision))

    def delete(self, key: str, *, revision: int | None = None, fence: Lease | None = None) -> int:
        """Blocking :meth:`kvstore.Bucket.delete` (same errors)."""
        return self.portal.call(self.aio.delete(key, revision=revision, fence=_aio(fence)))

    def purge(self, key: str, *, ttl: TTLValue | None = None, revision: int | None = None) -> int:
        """Blocking :meth:`kvstore.Bucket.purge` (same errors)."""
        return self.portal.call(self.aio.purge(key, ttl=ttl, revision=revision))

    def put_many(
        self,
        items: Mapping[str, BytesLike] | Iterable[tuple[str, BytesLike]],
        *,
        expect: Mapping[str, int] | None = None,
        ttl: TTLValue | Mapping[str, TTLValue] | None = None,
        max_keys: int = DEFAULT_MAX_BATCH,
        deadline: float = DEFAULT_COMMIT_DEADLINE,
        fence: Lease | None = None,
    ) -> dict[str, int]:
        """Blocking :meth:`kvstore.Bucket.put_many`: all stored or none (same errors)."""
        stored = self.aio.put_many(
            items,
            expect=expect,
            ttl=ttl,
            max_keys=max_keys,
            deadline=deadline,
            fence=_aio(fence),
        )
        return self.portal.call(stored)

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
        """As :meth:`kvstore.Bucket.prepare_many`: a batch to commit (same errors)."""
        batch = self.aio.prepare_many(
            items,
            expect=expect,
            ttl=ttl,
            max_keys=max_keys,
            deadline=deadline,
            fence=_aio(fence),
        )
        return KeyBatch(batch, self.portal)

    def get_many(self, keys: Iterable[str]) -> Snapshot:
        """Blocking :meth:`kvstore.Bucket.get_many` (same errors)."""
        return self.portal.call(self.aio.get_many(keys))

    def batch(
        self,
        *,
        max_keys: int = DEFAULT_MAX_BATCH,
        timeout: float | None = None,
        deadline: float = DEFAULT_COMMIT_DEADLINE,
        repeats: bool = False,
        fence: Lease | None = None,
    ) -> KeyBatch:
        """As :meth:`kvstore.Bucket.batch`: ``with bucket.batch() as b:`` commits on exit
        and abandons on an exception (same errors)."""
        batch = self.aio.batch(
            max_keys=max_keys,
            timeout=timeout,
            deadline=deadline,
            repeats=repeats,
            fence=_aio(fence),
        )
        return KeyBatch(batch, self.portal)

    def lock(
        self, name: str, *, ttl: TTLValue = "10s", timeout: float | None = None
    ) -> AbstractContextManager[Lease]:
        """As :meth:`kvstore.Bucket.lock`: ``with bucket.lock(name) as lease:`` holds the
        lock for the block (renewed on the loop thread meanwhile; same errors)."""
        return _Holding(self.aio.lock(name, ttl=ttl, timeout=timeout), self.portal)

    def election(self, name: str, *, ttl: TTLValue = "10s") -> Election:
        """As :meth:`kvstore.Bucket.election` (same errors)."""
        return Election(self.aio.election(name, ttl=ttl), self.portal)

    def keys(self, filters: str | list[str] = ">") -> Iterator[str]:
        """Blocking :meth:`kvstore.Bucket.keys`, a plain iterator (same errors)."""
        return ReadAheadIterator(self.portal, self.aio.keys(filters))

    def history(self, key: str) -> Iterator[Entry]:
        """Blocking :meth:`kvstore.Bucket.history`, a plain iterator (same errors)."""
        return ReadAheadIterator(self.portal, self.aio.history(key))

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
        """As :meth:`kvstore.Bucket.watch`: ``with bucket.watch(...) as w: for entry in w``
        (same errors)."""
        watcher = self.aio.watch(
            keys,
            include_history=include_history,
            updates_only=updates_only,
            ignore_deletes=ignore_deletes,
            meta_only=meta_only,
            resume_from=resume_from,
        )
        return KeyWatcher(watcher, self.portal)

    def status(self) -> BucketStatus:
        """Blocking :meth:`kvstore.Bucket.status` (same errors)."""
        return self.portal.call(self.aio.status())

    def purge_deletes(self, *, older_than: timedelta | None = timedelta(minutes=30)) -> int:
        """Blocking :meth:`kvstore.Bucket.purge_deletes` (same errors)."""
        return self.portal.call(self.aio.purge_deletes(older_than=older_than))

    def rekey(self) -> RekeyReport:
        """Blocking :meth:`kvstore.Bucket.rekey` (same errors)."""
        return self.portal.call(self.aio.rekey())

    def typed(self, value_type: type[T], *, format: ValueFormat = "json") -> TypedBucket[T]:
        """As :meth:`kvstore.Bucket.typed`: a view whose values are ``value_type``."""
        return TypedBucket(self.aio.typed(value_type, format=format), self)

    def decode_entry(
        self,
        subject: str,
        value: bytes,
        *,
        revision: int,
        created: datetime,
        headers: dict[str, str] | None,
    ) -> Entry:
        """As :meth:`kvstore.Bucket.decode_entry` (CPU only: runs in the calling thread)."""
        return self.aio.decode_entry(
            subject, value, revision=revision, created=created, headers=headers
        )

    def __repr__(self) -> str:
        return f"<blocking {self.aio!r}>"


class TypedBucket(Generic[T]):
    """A typed view whose calls block (:class:`kvstore.TypedBucket`; ``aio`` is that twin)."""

    def __init__(self, view: _typed.TypedBucket[T], bucket: Bucket) -> None:
        self.aio = view
        self.portal = bucket.portal
        self._bucket = bucket

    @property
    def bucket(self) -> Bucket:
        """The blocking bucket this view reads and writes."""
        return self._bucket

    @property
    def value_type(self) -> type[T]:
        """The type values decode to."""
        return self.aio.value_type

    @property
    def format(self) -> ValueFormat:
        """The values' encoding."""
        return self.aio.format

    def put(
        self, key: str, value: T, *, ttl: TTLValue | None = None, fence: Lease | None = None
    ) -> int:
        """Blocking :meth:`kvstore.TypedBucket.put` (same errors)."""
        return self.portal.call(self.aio.put(key, value, ttl=ttl, fence=_aio(fence)))

    def create(self, key: str, value: T, *, ttl: TTLValue | None = None) -> int:
        """Blocking :meth:`kvstore.TypedBucket.create` (same errors)."""
        return self.portal.call(self.aio.create(key, value, ttl=ttl))

    def update(self, key: str, value: T, revision: int, *, ttl: TTLValue | None = None) -> int:
        """Blocking :meth:`kvstore.TypedBucket.update` (same errors)."""
        return self.portal.call(self.aio.update(key, value, revision, ttl=ttl))

    def get(self, key: str, *, revision: int | None = None) -> TypedEntry[T]:
        """Blocking :meth:`kvstore.TypedBucket.get` (same errors)."""
        return self.portal.call(self.aio.get(key, revision=revision))

    def delete(self, key: str, *, revision: int | None = None, fence: Lease | None = None) -> int:
        """Blocking :meth:`kvstore.TypedBucket.delete` (same errors)."""
        return self.portal.call(self.aio.delete(key, revision=revision, fence=_aio(fence)))

    def purge(self, key: str, *, ttl: TTLValue | None = None, revision: int | None = None) -> int:
        """Blocking :meth:`kvstore.TypedBucket.purge` (same errors)."""
        return self.portal.call(self.aio.purge(key, ttl=ttl, revision=revision))

    def put_many(
        self,
        items: Mapping[str, T] | Iterable[tuple[str, T]],
        *,
        expect: Mapping[str, int] | None = None,
        ttl: TTLValue | Mapping[str, TTLValue] | None = None,
        max_keys: int = DEFAULT_MAX_BATCH,
        deadline: float = DEFAULT_COMMIT_DEADLINE,
        fence: Lease | None = None,
    ) -> dict[str, int]:
        """Blocking :meth:`kvstore.TypedBucket.put_many` (same errors)."""
        stored = self.aio.put_many(
            items,
            expect=expect,
            ttl=ttl,
            max_keys=max_keys,
            deadline=deadline,
            fence=_aio(fence),
        )
        return self.portal.call(stored)

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
        """As :meth:`kvstore.TypedBucket.prepare_many` (same errors)."""
        batch = self.aio.prepare_many(
            items,
            expect=expect,
            ttl=ttl,
            max_keys=max_keys,
            deadline=deadline,
            fence=_aio(fence),
        )
        return KeyBatch(batch, self.portal)

    def get_many(self, keys: Iterable[str]) -> TypedSnapshot[T]:
        """Blocking :meth:`kvstore.TypedBucket.get_many` (same errors)."""
        return self.portal.call(self.aio.get_many(keys))

    def keys(self, filters: str | list[str] = ">") -> Iterator[str]:
        """Blocking :meth:`kvstore.TypedBucket.keys`, a plain iterator (same errors)."""
        return ReadAheadIterator(self.portal, self.aio.keys(filters))

    def history(self, key: str) -> Iterator[TypedEntry[T]]:
        """Blocking :meth:`kvstore.TypedBucket.history`, a plain iterator (same errors)."""
        return ReadAheadIterator(self.portal, self.aio.history(key))

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
        """As :meth:`kvstore.TypedBucket.watch` (same errors)."""
        watcher = self.aio.watch(
            keys,
            include_history=include_history,
            updates_only=updates_only,
            ignore_deletes=ignore_deletes,
            meta_only=meta_only,
            resume_from=resume_from,
        )
        return TypedWatcher(watcher, self.portal)

    def __repr__(self) -> str:
        return f"<blocking {self.aio!r}>"


class _Watch(Generic[E]):
    """A running watch as a context manager and a plain iterator of its entries."""

    def __init__(self, watcher: Any, portal: Portal) -> None:
        self.aio = watcher
        self.portal = portal
        self._entries: ReadAheadIterator[E] = ReadAheadIterator(portal, watcher, stop=watcher.stop)

    @property
    def initial_done(self) -> bool:
        """Whether the snapshot part (current values, or history) has been delivered."""
        return bool(self.aio.initial_done.is_set())

    @property
    def resets(self) -> int:
        """How many times the watch re-created its consumer (see the async twin)."""
        return int(self.aio.resets)

    @property
    def skipped(self) -> int:
        """Messages skipped because their subject is not UTF-8 (see the async twin)."""
        return int(self.aio.skipped)

    def initial(self) -> Iterator[E]:
        """The entries of the snapshot part, ending once it has been delivered (see the
        async twin's ``initial``); iterate the watch itself afterwards for the changes."""
        return ReadAheadIterator(self.portal, self.aio.initial())

    def __iter__(self) -> Iterator[E]:
        return self._entries

    def stop(self) -> None:
        """Stop watching and delete the consumer."""
        self._entries.close()

    def __enter__(self) -> _Watch[E]:
        self.portal.call(self.aio.__aenter__())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._entries.close()
        self.portal.call(self.aio.__aexit__(exc_type, exc, tb))


class KeyWatcher(_Watch[Entry]):
    """A watch (:class:`kvstore.KeyWatcher`) iterated without ``async``::

    with bucket.watch("alice.>") as watcher:
        for entry in watcher: ...
    """

    def __init__(self, watcher: _watch.KeyWatcher, portal: Portal) -> None:
        super().__init__(watcher, portal)

    def initial(self) -> Iterator[Entry]:
        """The entries of the snapshot part (see :meth:`kvstore.KeyWatcher.initial`)."""
        return super().initial()

    def __enter__(self) -> KeyWatcher:
        super().__enter__()
        return self


class TypedWatcher(_Watch[TypedEntry[T]], Generic[T]):
    """A typed watch (:class:`kvstore.TypedWatcher`) iterated without ``async``."""

    def __init__(self, watcher: _typed.TypedWatcher[T], portal: Portal) -> None:
        super().__init__(watcher, portal)

    def initial(self) -> Iterator[TypedEntry[T]]:
        """The entries of the snapshot part (see :meth:`kvstore.TypedWatcher.initial`)."""
        return super().initial()

    def __enter__(self) -> TypedWatcher[T]:
        super().__enter__()
        return self


class KeyBatch:
    """Writes queued for one atomic commit (:class:`kvstore.KeyBatch`): queuing runs in the
    calling thread; ``commit()`` and the ``with`` block's end block until stored."""

    def __init__(self, batch: _batch.KeyBatch, portal: Portal) -> None:
        self.aio = batch
        self.portal = portal

    def put(self, key: str, value: BytesLike, *, ttl: TTLValue | None = None) -> None:
        """As :meth:`kvstore.KeyBatch.put` (same errors)."""
        self.aio.put(key, value, ttl=ttl)

    def create(self, key: str, value: BytesLike, *, ttl: TTLValue | None = None) -> None:
        """As :meth:`kvstore.KeyBatch.create` (same errors)."""
        self.aio.create(key, value, ttl=ttl)

    def update(
        self, key: str, value: BytesLike, revision: int, *, ttl: TTLValue | None = None
    ) -> None:
        """As :meth:`kvstore.KeyBatch.update` (same errors)."""
        self.aio.update(key, value, revision, ttl=ttl)

    def delete(self, key: str, *, revision: int | None = None) -> None:
        """As :meth:`kvstore.KeyBatch.delete` (same errors)."""
        self.aio.delete(key, revision=revision)

    def purge(self, key: str, *, ttl: TTLValue | None = None, revision: int | None = None) -> None:
        """As :meth:`kvstore.KeyBatch.purge` (same errors)."""
        self.aio.purge(key, ttl=ttl, revision=revision)

    def abandon(self) -> None:
        """Drop every queued write; nothing is sent."""
        self.aio.abandon()

    def commit(self) -> dict[str, int]:
        """Blocking :meth:`kvstore.KeyBatch.commit` (same errors)."""
        return self.portal.call(self.aio.commit())

    def __enter__(self) -> KeyBatch:
        self.portal.call(self.aio.__aenter__())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.portal.call(self.aio.__aexit__(exc_type, exc, tb))


class Lease:
    """A held lease (:class:`kvstore.Lease`; ``aio`` is that twin), renewed on the
    connection's loop thread while the ``with`` block runs."""

    def __init__(self, lease: _lease.Lease, portal: Portal) -> None:
        self.aio = lease
        self.portal = portal

    @property
    def key(self) -> str:
        """As :attr:`kvstore.Lease.key`."""
        return self.aio.key

    @property
    def bucket(self) -> str:
        """As :attr:`kvstore.Lease.bucket`."""
        return self.aio.bucket

    @property
    def value(self) -> bytes:
        """As :attr:`kvstore.Lease.value`."""
        return self.aio.value

    @property
    def ttl(self) -> int:
        """As :attr:`kvstore.Lease.ttl`."""
        return self.aio.ttl

    @property
    def token(self) -> int:
        """As :attr:`kvstore.Lease.token`."""
        return self.aio.token

    @property
    def revision(self) -> int:
        """As :attr:`kvstore.Lease.revision`."""
        return self.aio.revision

    @property
    def held(self) -> bool:
        """As :attr:`kvstore.Lease.held` (read on the loop thread)."""
        return self.portal.call(_held(self.aio))

    def wait_lost(self) -> None:
        """Blocking :meth:`kvstore.Lease.wait_lost`."""
        self.portal.call(self.aio.wait_lost())

    def release(self) -> None:
        """Blocking :meth:`kvstore.Lease.release` (not cut short by Ctrl-C)."""
        self.portal.call(self.aio.release(), cancel_on_interrupt=False)

    def __repr__(self) -> str:
        return f"<blocking {self.aio!r}>"


class Election:
    """A leader election whose calls block (:class:`kvstore.Election`; ``aio`` is that
    twin)."""

    def __init__(self, election: _election.Election, portal: Portal) -> None:
        self.aio = election
        self.portal = portal

    @property
    def name(self) -> str:
        """As :attr:`kvstore.Election.name`."""
        return self.aio.name

    @property
    def ttl(self) -> int:
        """As :attr:`kvstore.Election.ttl`."""
        return self.aio.ttl

    def campaign(
        self, value: bytes, *, timeout: float | None = None
    ) -> AbstractContextManager[Lease]:
        """As :meth:`kvstore.Election.campaign`: ``with election.campaign(value) as lease:``
        runs the block as leader (same errors)."""
        return _Holding(self.aio.campaign(value, timeout=timeout), self.portal)

    def leader(self) -> bytes | None:
        """Blocking :meth:`kvstore.Election.leader` (same errors)."""
        return self.portal.call(self.aio.leader())

    def observe(self) -> Iterator[bytes]:
        """Blocking :meth:`kvstore.Election.observe`, a plain iterator (same errors)."""
        return ReadAheadIterator(self.portal, self.aio.observe())


class _Holding(AbstractContextManager[Lease]):
    """A lease held for a ``with`` block: the async context manager run on the loop."""

    def __init__(self, holding: AbstractAsyncContextManager[_lease.Lease], portal: Portal) -> None:
        self._holding = holding
        self._portal = portal

    def __enter__(self) -> Lease:
        entered: list[_lease.Lease] = []

        async def enter() -> _lease.Lease:
            lease = await self._holding.__aenter__()
            entered.append(lease)
            return lease

        try:
            return Lease(self._portal.call(enter()), self._portal)
        except KeyboardInterrupt as exc:
            # Ctrl-C as the lease was taken: the portal's cancel came too late, and no
            # ``with`` block will release it.
            if entered:
                leaving = self._holding.__aexit__(type(exc), exc, exc.__traceback__)
                self._portal.call(leaving, cancel_on_interrupt=False)
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        # Not cancelled by Ctrl-C: a release cut short (or never started) would leave the
        # lease renewed on the loop thread for ever.
        leaving = self._holding.__aexit__(exc_type, exc, tb)
        return self._portal.call(leaving, cancel_on_interrupt=False)


async def _held(lease: _lease.Lease) -> bool:
    return lease.held


def _aio(fence: Lease | None) -> _lease.Lease | None:
    return None if fence is None else fence.aio
