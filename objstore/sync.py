"""Blocking twins of objstore: the same names, arguments, results and errors, without ``async``.

::

    import jetstream.sync, objstore.sync

    with jetstream.sync.connect(url) as js:
        store = objstore.sync.create_store(js, "artifacts")
        info = store.put("model.bin", "path/to/model.bin", ttl="30d")
        with store.open("model.bin") as reader:       # digest checked at the end
            for chunk in reader: ...
        for info in store.list(): ...

Each handle drives its async twin (``.aio``) on the connection's loop thread (see
:mod:`jetstream.sync`): share it between threads freely. Iterators (``list``, ``watch``,
``list_stores``) stop what they hold open on the server when left early (``break`` then
``close()``, or the iterator collected).

``put`` takes what the async ``put`` takes; a plain iterable of bytes is advanced in a worker
thread (not on the loop every thread shares), so it may block or itself read another
object: ``store.put(name, reader)`` copies what a blocking :class:`ObjectReader` reads.
``progress`` callbacks (``put``, ``get_file``) run on the loop's thread: they must return
quickly and must not call the blocking API (that raises ``WrongEventLoopError``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING

from jetstream import ClientValidationError, Keyring, RekeyReport, TTLValue
from jetstream._blocking.portal import BlockingIterator, Portal, ReadAheadIterator
from jetstream.sync import JetStream

from . import _manage, _store
from ._download import DEFAULT_STALL_TIMEOUT
from ._io import Source
from ._models import DEFAULT_CHUNK_SIZE, ObjectInfo, StoreConfig, StoreStatus
from ._pulled_source import pulled_in_threads
from ._store import _DEFAULT_CLEANUP_AGE
from ._upload import Progress

if TYPE_CHECKING:
    from typing import Unpack

    from ._manage import StoreOptions

__all__ = [
    "ObjectReader",
    "ObjectStore",
    "create_store",
    "delete_store",
    "list_stores",
    "open_store",
    "update_store",
]


def create_store(
    js: JetStream,
    name: str,
    config: StoreConfig | None = None,
    *,
    encryption: Keyring | None = None,
    allow_plaintext: bool = False,
    **options: Unpack[StoreOptions],
) -> ObjectStore:
    """Blocking :func:`objstore.create_store` (same options and errors)."""
    made = _manage.create_store(
        js.aio, name, config, encryption=encryption, allow_plaintext=allow_plaintext, **options
    )
    return ObjectStore(js.portal.call(made), js)


def open_store(
    js: JetStream,
    name: str,
    *,
    encryption: Keyring | None = None,
    allow_plaintext: bool = False,
) -> ObjectStore:
    """Blocking :func:`objstore.open_store` (same errors)."""
    opened = _store.open_store(js.aio, name, encryption=encryption, allow_plaintext=allow_plaintext)
    return ObjectStore(js.portal.call(opened), js)


def update_store(
    js: JetStream,
    name: str,
    config: StoreConfig | None = None,
    **options: Unpack[StoreOptions],
) -> ObjectStore:
    """Blocking :func:`objstore.update_store` (same options and errors)."""
    return ObjectStore(js.portal.call(_manage.update_store(js.aio, name, config, **options)), js)


def delete_store(js: JetStream, name: str) -> None:
    """Blocking :func:`objstore.delete_store` (same errors)."""
    js.portal.call(_manage.delete_store(js.aio, name))


def list_stores(js: JetStream) -> Iterator[str]:
    """Blocking :func:`objstore.list_stores`: the store names, as a plain iterator."""
    return ReadAheadIterator(js.portal, _manage.list_stores(js.aio))


class ObjectStore:
    """An object store whose calls block (:class:`objstore.ObjectStore`; ``aio`` is that
    twin)."""

    def __init__(self, store: _store.ObjectStore, js: JetStream) -> None:
        self.aio = store
        self.portal: Portal = js.portal
        self._js = js

    @property
    def name(self) -> str:
        """The store name."""
        return self.aio.name

    @property
    def stream(self) -> str:
        """The backing stream, ``OBJ_<name>``."""
        return self.aio.stream

    @property
    def js(self) -> JetStream:
        """The blocking context this store was opened with."""
        return self._js

    @property
    def encryption(self) -> Keyring | None:
        """As :attr:`objstore.ObjectStore.encryption`."""
        return self.aio.encryption

    def put(
        self,
        name: str,
        source: Source,
        *,
        ttl: TTLValue | None = None,
        meta: dict[str, str] | None = None,
        description: str = "",
        headers: dict[str, list[str]] | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        progress: Progress | None = None,
    ) -> ObjectInfo:
        """Blocking :meth:`objstore.ObjectStore.put` (same sources and errors). A plain
        iterable is advanced in a worker thread; ``progress`` runs on the loop's thread and
        must not block."""
        stored = self.aio.put(
            name,
            self._loop_source(source, chunk_size),
            ttl=ttl,
            meta=meta,
            description=description,
            headers=headers,
            chunk_size=chunk_size,
            progress=progress,
        )
        return self.portal.call(stored)

    def _loop_source(self, source: Source, chunk_size: int) -> Source:
        """What the async upload is given for ``source``. A blocking reader of this
        connection is read on the loop directly; of another connection, it is iterated
        in a worker thread like any iterable (its ``read()`` takes no size: it is no file)."""
        if isinstance(source, ObjectReader):
            chunks = iter(source)  # refused once its read has ended
            if source.portal is self.portal:
                return _chunks(source.aio)
            return pulled_in_threads(chunks, chunk_size)
        return pulled_in_threads(source, chunk_size)

    def delete(self, name: str) -> None:
        """Blocking :meth:`objstore.ObjectStore.delete` (same errors)."""
        self.portal.call(self.aio.delete(name))

    def update_meta(
        self,
        name: str,
        *,
        new_name: str | None = None,
        description: str | None = None,
        meta: dict[str, str] | None = None,
        headers: dict[str, list[str]] | None = None,
    ) -> ObjectInfo:
        """Blocking :meth:`objstore.ObjectStore.update_meta` (same errors)."""
        updated = self.aio.update_meta(
            name, new_name=new_name, description=description, meta=meta, headers=headers
        )
        return self.portal.call(updated)

    def add_link(self, name: str, target: str | ObjectInfo) -> ObjectInfo:
        """Blocking :meth:`objstore.ObjectStore.add_link` (same errors)."""
        return self.portal.call(self.aio.add_link(name, target))

    def add_bucket_link(self, name: str, store: ObjectStore) -> ObjectInfo:
        """Blocking :meth:`objstore.ObjectStore.add_bucket_link`: ``store`` is a blocking
        store (same errors)."""
        return self.portal.call(self.aio.add_bucket_link(name, store.aio))

    def rekey(self) -> RekeyReport:
        """Blocking :meth:`objstore.ObjectStore.rekey` (same errors)."""
        return self.portal.call(self.aio.rekey())

    def seal(self) -> None:
        """Blocking :meth:`objstore.ObjectStore.seal` (same errors)."""
        self.portal.call(self.aio.seal())

    def cleanup(self, *, older_than: timedelta = _DEFAULT_CLEANUP_AGE) -> int:
        """Blocking :meth:`objstore.ObjectStore.cleanup` (same errors)."""
        return self.portal.call(self.aio.cleanup(older_than=older_than))

    def info(self, name: str, *, include_deleted: bool = False) -> ObjectInfo:
        """Blocking :meth:`objstore.ObjectStore.info` (same errors)."""
        return self.portal.call(self.aio.info(name, include_deleted=include_deleted))

    def open(self, name: str, *, stall_timeout: float = DEFAULT_STALL_TIMEOUT) -> _OpeningReader:
        """As :meth:`objstore.ObjectStore.open`: ``with store.open(name) as reader: for chunk
        in reader: ...`` (links followed, the digest checked at the end; same errors: bad
        input at once, the rest on entering or while reading)."""
        return _OpeningReader(self.aio.open(name, stall_timeout=stall_timeout), self.portal)

    def get_bytes(self, name: str, *, stall_timeout: float = DEFAULT_STALL_TIMEOUT) -> bytes:
        """Blocking :meth:`objstore.ObjectStore.get_bytes` (same errors)."""
        return self.portal.call(self.aio.get_bytes(name, stall_timeout=stall_timeout))

    def get_file(
        self,
        name: str,
        path: str | os.PathLike[str],
        *,
        progress: Progress | None = None,
        stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    ) -> ObjectInfo:
        """Blocking :meth:`objstore.ObjectStore.get_file` (same errors); ``progress`` runs on
        the loop's thread and must not block."""
        saved = self.aio.get_file(name, path, progress=progress, stall_timeout=stall_timeout)
        return self.portal.call(saved)

    def status(self) -> StoreStatus:
        """Blocking :meth:`objstore.ObjectStore.status` (same errors)."""
        return self.portal.call(self.aio.status())

    def watch(
        self, *, include_history: bool = False, updates_only: bool = False
    ) -> Iterator[ObjectInfo]:
        """Blocking :meth:`objstore.ObjectStore.watch`, a plain iterator; close it (or leave
        it to the collector) to stop watching (same errors, from the first ``next()``)."""
        watch = self.aio.watch(include_history=include_history, updates_only=updates_only)
        return ReadAheadIterator(self.portal, watch)

    def list(self, *, include_deleted: bool = False) -> Iterator[ObjectInfo]:
        """Blocking :meth:`objstore.ObjectStore.list`, a plain iterator (same errors)."""
        return ReadAheadIterator(self.portal, self.aio.list(include_deleted=include_deleted))

    def __repr__(self) -> str:
        return f"<blocking {self.aio!r}>"


class ObjectReader:
    """An object being read (:class:`objstore.ObjectReader`; ``aio`` is that twin): iterate
    it for the chunks (bytes), or ``read()`` it whole. The digest, size and chunk count are
    checked after the last chunk, as the async reader checks them (same errors)."""

    def __init__(self, reader: _store.ObjectReader, portal: Portal) -> None:
        self.aio = reader
        self.portal = portal
        self._chunks: BlockingIterator[bytes] = BlockingIterator(portal, reader)
        self._ended = False

    @property
    def info(self) -> ObjectInfo:
        """The meta record of the object being read (a link's target's)."""
        return self.aio.info

    def read(self) -> bytes:
        """Blocking :meth:`objstore.ObjectReader.read`: the whole object (same errors; a
        ClientValidationError once the ``with`` block has ended, as iterating)."""
        self._check_open()
        return self.portal.call(self.aio.read())

    def __iter__(self) -> Iterator[bytes]:
        """The chunks.

        Raises:
            ClientValidationError: the ``with`` block of the read has ended (its consumer is
                gone: nothing more would come, and e.g. a copy would store an empty object).
        """
        self._check_open()
        return self._chunks

    def _check_open(self) -> None:
        if self._ended:
            raise ClientValidationError(
                f"object {self.info.name!r}: its read ended with its `with` block; open it again"
            )

    def __enter__(self) -> ObjectReader:
        self.portal.call(self.aio.__aenter__())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._ended = True
        self._chunks.close()
        if not self.portal.closed:
            self.portal.call(self.aio.__aexit__(exc_type, exc, tb))


class _OpeningReader:
    """What :meth:`ObjectStore.open` returns: entering resolves links and gives an
    :class:`ObjectReader`; leaving ends the read (its consumer is deleted)."""

    def __init__(self, opening: _store._OpeningReader, portal: Portal) -> None:
        self.aio = opening
        self.portal = portal
        self._reader: ObjectReader | None = None

    def __enter__(self) -> ObjectReader:
        self._reader = ObjectReader(self.portal.call(self.aio.__aenter__()), self.portal)
        return self._reader

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._reader is not None:  # what the async opening's exit does: end the read
            self._reader.__exit__(exc_type, exc, tb)


async def _chunks(reader: _store.ObjectReader) -> AsyncIterator[bytes]:
    """A reader's chunks as a plain async iterator (the reader itself has ``read()``, which
    an upload would take for a file's)."""
    async for chunk in reader:
        yield chunk
