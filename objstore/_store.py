"""ObjectStore: objects in a NATS object store, uploaded over fast-ingest batches."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from nats.nuid import NUID

from jetstream import (
    ClientValidationError,
    InvalidObjectNameError,
    JetStream,
    JetStreamError,
    MessageNotFoundError,
    ObjectExistsError,
    ObjectNotFoundError,
    OrderedConsumer,
    StoredMessage,
    StoreNotFoundError,
    StreamInfo,
    StreamNotFoundError,
    TTLValue,
    format_ttl,
    parse_ttl_at_least,
    scan_stream,
)
from jetstream import headers as hdr
from kvstore import validate_bucket_name

from ._download import DEFAULT_STALL_TIMEOUT, ObjectReader, check_stall_timeout
from ._io import Source
from ._models import (
    DEFAULT_CHUNK_SIZE,
    ObjectInfo,
    ObjectLink,
    ObjectMetaOptions,
    StoreStatus,
    chunk_subject,
    decode_info,
    encode_info,
    meta_subject,
    name_from_meta_subject,
    now_rfc3339,
    store_config_from_stream,
    stream_name,
)
from ._upload import Progress, upload

__all__ = ["ObjectStore", "open_store", "store_info", "validate_object_name"]

_MAX_CHUNK_SIZE = 8 * 1024 * 1024
_DEFAULT_CLEANUP_AGE = timedelta(minutes=1)
_WRITE_BATCH = 4 * 1024 * 1024
_log = logging.getLogger("objstore")


def validate_object_name(name: str) -> None:
    """Raises InvalidObjectNameError: not a str, or empty."""
    if not isinstance(name, str) or not name:
        raise InvalidObjectNameError(f"object names are non-empty strings: {name!r}")


class ObjectStore:
    """A NATS object store (stream ``OBJ_<name>``); get one from :func:`objstore.create_store`
    or :func:`objstore.open_store`. Objects written here are readable by every NATS client.

    **TTL.** ``put(..., ttl=)`` gives the chunks and the meta record a ``Nats-TTL``, at least one
    whole second and not below the store's ``marker_ttl`` (the server would stretch it to that):
    the object disappears as a whole (its meta last, so a reader never finds a meta without
    chunks except in the last instant, when the read fails with :class:`DigestMismatchError`).
    """

    def __init__(
        self,
        js: JetStream,
        name: str,
        *,
        direct: bool = True,
        marker_ttl: timedelta | None = None,
        batched: bool | None = None,
    ) -> None:
        self._js = js
        self.name = name
        self.stream = stream_name(name)
        self._direct = direct
        self._marker_ttl = marker_ttl
        self._batched = batched  # the stream's allow_batched; None until checked
        self._fallback_logged = False

    def __repr__(self) -> str:
        return f"<ObjectStore {self.name!r}>"

    # -- writing ------------------------------------------------------------------------------

    async def put(
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
        """Store an object from bytes, a path (``str`` or ``PathLike``), a binary file, or an
        (async) iterable of bytes, replacing any object of that name once complete.

        ``meta`` is free metadata (``metadata`` on the wire), ``progress(done, total)`` is called
        after each chunk (``total`` None when unknown).

        Raises:
            InvalidObjectNameError, InvalidTTLError, ClientValidationError, TypeError: bad input,
                before anything is sent; FileNotFoundError etc. for an unreadable path.
            UploadFailedError: the upload failed (no meta written, its chunks removed).
            CommitUnknownError: the meta record's ack was lost and could not be asked again
                before the connection's ``retry_deadline``; the object may or may not exist.
        """
        validate_object_name(name)
        if isinstance(chunk_size, bool) or not 1 <= chunk_size <= _MAX_CHUNK_SIZE:
            raise ClientValidationError(f"chunk_size must be 1..{_MAX_CHUNK_SIZE}: {chunk_size}")
        _check_metadata(meta, headers)
        ttl_headers = {hdr.TTL: format_ttl(self._checked_ttl(ttl))} if ttl is not None else {}
        return await upload(
            self,
            name,
            source,
            ttl_headers=ttl_headers,
            chunk_size=chunk_size,
            description=description,
            headers=headers,
            metadata=meta,
            progress=progress,
        )

    async def _fast_ingest(self) -> bool:
        """Whether uploads may use fast ingest: the stream's ``allow_batched``, looked up once
        per store (stores made by other clients lack it: uploads then use acked publishes)."""
        if self._batched is None:
            self._batched = (await store_info(self._js, self.name)).config.allow_batched
        if not self._batched and not self._fallback_logged:
            self._fallback_logged = True
            _log.info(
                "object store %r has no allow_batched (made by another client): uploads use "
                "acked publishes in a bounded window instead of fast ingest",
                self.name,
            )
        return self._batched

    def _checked_ttl(self, ttl: TTLValue) -> int:
        return parse_ttl_at_least(ttl, self._marker_ttl, owner=f"store {self.name!r}")

    async def delete(self, name: str) -> None:
        """Delete an object: a ``deleted`` meta record replaces it, then its chunks go.

        Raises:
            ObjectNotFoundError: no such object.
        """
        info = await self.info(name)
        tombstone = ObjectInfo(
            name=info.name,
            bucket=self.name,
            nuid=info.nuid,
            size=0,
            mtime=now_rfc3339(),
            chunks=0,
            deleted=True,
        )
        await self._write_meta(tombstone, {})
        if not info.is_link:
            await self._js.purge_stream(self.stream, subject=chunk_subject(self.name, info.nuid))

    async def update_meta(
        self,
        name: str,
        *,
        new_name: str | None = None,
        description: str | None = None,
        meta: dict[str, str] | None = None,
        headers: dict[str, list[str]] | None = None,
    ) -> ObjectInfo:
        """Change an object's name, description, metadata or headers (not its content).

        Raises:
            ObjectNotFoundError: no such object; ObjectExistsError: ``new_name`` is taken.
        """
        info = await self.info(name)
        _check_metadata(meta, headers)
        target = new_name if new_name is not None else name
        validate_object_name(target)
        if target != name and await self._current_info(target) is not None:
            raise ObjectExistsError(f"an object named {target!r} exists")
        updated = ObjectInfo(
            name=target,
            bucket=self.name,
            nuid=info.nuid,
            size=info.size,
            mtime=now_rfc3339(),
            chunks=info.chunks,
            digest=info.digest,
            description=info.description if description is None else description,
            headers=info.headers if headers is None else headers,
            metadata=info.metadata if meta is None else meta,
            options=info.options,
        )
        await self._write_meta(updated, {})
        if target != name:
            await self._js.purge_stream(self.stream, subject=meta_subject(self.name, name))
        return updated

    async def add_link(self, name: str, target: str | ObjectInfo) -> ObjectInfo:
        """Make ``name`` a link to another object (of this store, or of another when
        ``target`` is an :class:`ObjectInfo` from it). Reads of ``name`` follow the link.

        Raises:
            ObjectNotFoundError: the target does not exist; ObjectExistsError: ``name`` is an
                object that is not a link; ClientValidationError: the target is a link.
        """
        validate_object_name(name)
        info = target if isinstance(target, ObjectInfo) else await self.info(target)
        if info.deleted:
            raise ObjectNotFoundError(info.name)
        if info.is_link:
            raise ClientValidationError("a link cannot point to another link")
        return await self._write_link(name, ObjectLink(bucket=info.bucket, name=info.name))

    async def add_bucket_link(self, name: str, store: ObjectStore) -> ObjectInfo:
        """Make ``name`` a link to a whole store.

        Raises:
            ObjectExistsError: ``name`` is an object that is not a link.
        """
        validate_object_name(name)
        return await self._write_link(name, ObjectLink(bucket=store.name))

    async def _write_link(self, name: str, link: ObjectLink) -> ObjectInfo:
        existing = await self._current_info(name)
        if existing is not None and not existing.is_link:
            raise ObjectExistsError(f"{name!r} is an object, not a link")
        info = ObjectInfo(
            name=name,
            bucket=self.name,
            nuid=NUID().next().decode(),
            size=0,
            mtime=now_rfc3339(),
            chunks=0,
            options=ObjectMetaOptions(link=link),
        )
        await self._write_meta(info, {})
        return info

    async def seal(self) -> None:
        """Make the store read-only, for good.

        Raises:
            StreamNotFoundError: the store was deleted.
        """
        info = await self._js.stream_info(self.stream)
        info.config.sealed = True
        await self._js.update_stream(info.config)

    async def cleanup(self, *, older_than: timedelta = _DEFAULT_CLEANUP_AGE) -> int:
        """Remove chunks no meta record refers to (left by a crashed or killed uploader) whose
        newest chunk is older than ``older_than`` (so uploads in progress are left alone).
        Returns how many objects' chunks were removed.

        Raises:
            JetStreamError: the store could not be scanned or purged.
        """
        referenced = {info.nuid async for info in self._infos(include_deleted=False)}
        now = datetime.now(UTC)
        orphans = []
        async for message in scan_stream(
            self._js, self.stream, [f"$O.{self.name}.C.>"], headers_only=True
        ):
            nuid = message.subject.rsplit(".", 1)[1]
            if nuid not in referenced and now - message.time >= older_than:
                orphans.append(message.subject)
        for subject in orphans:
            await self._js.purge_stream(self.stream, subject=subject)
        return len(orphans)

    # -- reading ------------------------------------------------------------------------------

    async def info(self, name: str, *, include_deleted: bool = False) -> ObjectInfo:
        """An object's meta record.

        Raises:
            ObjectNotFoundError: no such object (or deleted, unless ``include_deleted``).
        """
        validate_object_name(name)
        info = await self._current_info(name, include_deleted=include_deleted)
        if info is None:
            raise ObjectNotFoundError(name)
        return info

    def open(self, name: str, *, stall_timeout: float = DEFAULT_STALL_TIMEOUT) -> _OpeningReader:
        """``async with store.open(name) as reader: async for chunk in reader: ...``; links are
        followed. Memory stays around 8 MiB whatever the object size.

        A read ends with the whole object or an error in bounded time: an object deleted or
        replaced while it is read fails within about a second of the reader running out of
        buffered chunks, and a read that gets no chunk for ``stall_timeout`` seconds (default
        30; e.g. the server down) fails then.

        Raises:
            ClientValidationError: ``stall_timeout`` is not a positive number (at once), or
                ``name`` is a link to a whole store (on entering).
            ObjectNotFoundError: (on entering) no such object, or a link to a missing one;
                (while reading) the object was deleted or replaced.
            DigestMismatchError: (while reading) corrupt or incomplete.
            RequestTimeoutError: (while reading) no chunk for ``stall_timeout`` seconds.
        """
        validate_object_name(name)
        check_stall_timeout(stall_timeout)
        return _OpeningReader(self, name, stall_timeout)

    async def get_bytes(self, name: str, *, stall_timeout: float = DEFAULT_STALL_TIMEOUT) -> bytes:
        """The whole object in memory (``stall_timeout`` as in :meth:`open`).

        Raises:
            ObjectNotFoundError: no such object, or deleted or replaced while being read;
            DigestMismatchError: corrupt or incomplete; RequestTimeoutError: no chunk for
            ``stall_timeout`` seconds; ClientValidationError: a bad ``stall_timeout``.
        """
        async with self.open(name, stall_timeout=stall_timeout) as reader:
            return await reader.read()

    async def get_file(
        self,
        name: str,
        path: str | os.PathLike[str],
        *,
        progress: Progress | None = None,
        stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    ) -> ObjectInfo:
        """Download into ``path`` (written as ``<path>.part`` and renamed when the digest
        matches, so ``path`` never holds a partial or corrupt object; the ``.part`` file is
        removed when the download fails). ``stall_timeout`` as in :meth:`open`.

        Raises:
            ObjectNotFoundError, DigestMismatchError, RequestTimeoutError,
            ClientValidationError: as :meth:`get_bytes`; OSError from the file.
        """
        target = Path(path)
        partial = target.with_name(target.name + ".part")
        loop = asyncio.get_running_loop()
        opening = self.open(name, stall_timeout=stall_timeout)  # bad input: before any file
        try:
            async with opening as reader:
                done = 0
                file = await loop.run_in_executor(None, partial.open, "wb")
                # Written in ~4 MiB batches, one batch in flight while the next arrives.
                pending: list[bytes] = []
                writing: asyncio.Future[None] | None = None
                try:
                    async for chunk in reader:
                        pending.append(chunk)
                        done += len(chunk)
                        if len(pending) * len(chunk) >= _WRITE_BATCH:
                            if writing is not None:
                                await writing
                            writing = loop.run_in_executor(None, file.writelines, pending)
                            pending = []
                        if progress is not None:
                            progress(done, reader.info.size)
                    if writing is not None:
                        await writing
                    await loop.run_in_executor(None, file.writelines, pending)
                finally:
                    if writing is not None and not writing.done():
                        await asyncio.wait([writing])
                    await loop.run_in_executor(None, file.close)
            os.replace(partial, target)
            return reader.info
        finally:
            partial.unlink(missing_ok=True)

    async def list(self, *, include_deleted: bool = False) -> AsyncIterator[ObjectInfo]:
        """Every object's meta record (deleted ones only with ``include_deleted``).

        Raises:
            JetStreamError: the store could not be scanned.
        """
        async for info in self._infos(include_deleted=include_deleted):
            yield info

    async def status(self) -> StoreStatus:
        """The store's configuration, size and sealed state.

        Raises:
            StoreNotFoundError: the store was deleted.
        """
        info = await store_info(self._js, self.name)
        return StoreStatus(
            store=self.name,
            size=info.state.bytes,
            sealed=info.config.sealed,
            config=store_config_from_stream(info.config),
            stream_info=info,
        )

    async def watch(
        self, *, include_history: bool = False, updates_only: bool = False
    ) -> AsyncIterator[ObjectInfo]:
        """Changes of the store's objects: each put, meta update, delete (``deleted``), and
        expiry (``expired`` and ``deleted``, on stores with ``marker_ttl``), as they happen;
        first the current state unless ``updates_only``.

        Raises:
            ClientValidationError: both ``include_history`` and ``updates_only``.
            StreamNotFoundError: the store was deleted.
        """
        if include_history and updates_only:
            raise ClientValidationError("include_history and updates_only exclude each other")
        policy = "all" if include_history else "new" if updates_only else "last_per_subject"
        async with OrderedConsumer(
            self._js, self.stream, filter_subjects=[f"$O.{self.name}.M.>"], deliver_policy=policy
        ) as consumer:
            async for message in consumer:
                yield self._info_from_message(message.subject, message.data, message.headers)

    # -- internals ----------------------------------------------------------------------------

    async def _current_info(self, name: str, *, include_deleted: bool = False) -> ObjectInfo | None:
        try:
            message = await self._js.get_last_message(
                self.stream, meta_subject(self.name, name), direct=None if self._direct else False
            )
        except MessageNotFoundError:
            return None
        info = self._info_from_stored(message)
        if info.deleted and not include_deleted:
            return None
        return info

    def _info_from_stored(self, message: StoredMessage) -> ObjectInfo:
        return self._info_from_message(message.subject, message.data, message.headers)

    def _info_from_message(self, subject: str, data: bytes, headers: dict[str, str]) -> ObjectInfo:
        if data:
            return decode_info(data)
        # A server expiry marker (or an empty meta): the object is gone.
        return ObjectInfo(
            name=name_from_meta_subject(subject),
            bucket=self.name,
            nuid="",
            size=0,
            mtime=now_rfc3339(),
            chunks=0,
            deleted=True,
            expired=hdr.MARKER_REASON in headers,
        )

    async def _infos(self, *, include_deleted: bool) -> AsyncIterator[ObjectInfo]:
        async for message in scan_stream(self._js, self.stream, [f"$O.{self.name}.M.>"]):
            info = self._info_from_stored(message)
            if include_deleted or not info.deleted:
                yield info

    async def _write_meta(
        self, info: ObjectInfo, ttl_headers: dict[str, str], *, msg_id: str | None = None
    ) -> None:
        subject = meta_subject(self.name, info.name)
        # A meta record replaces the previous one of the same name. The Msg-Id makes a lost
        # ack safe to ask again (the repeat is answered as a duplicate, not stored twice).
        headers = {hdr.ROLLUP: hdr.ROLLUP_SUBJECT, **ttl_headers}
        msg_id = msg_id or NUID().next().decode()
        await self._js.publish(subject, encode_info(info), headers=headers, msg_id=msg_id)


class _OpeningReader:
    """What ``open()`` returns: enter it to resolve links and get an :class:`ObjectReader`."""

    def __init__(self, store: ObjectStore, name: str, stall_timeout: float) -> None:
        self._store = store
        self._name = name
        self._stall_timeout = stall_timeout
        self._reader: ObjectReader | None = None

    async def __aenter__(self) -> ObjectReader:
        info = await self._store.info(self._name)
        store = self._store
        if info.is_link:
            link = info.link
            assert link is not None
            if not link.name:
                raise ClientValidationError(f"{self._name!r} links to a whole store, not an object")
            if link.bucket != store.name:
                store = await open_store(store._js, link.bucket)
            info = await store.info(link.name)
        self._reader = ObjectReader(store, info, stall_timeout=self._stall_timeout)
        return await self._reader.__aenter__()

    async def __aexit__(self, *exc: object) -> None:
        if self._reader is not None:
            await self._reader.__aexit__(None, None, None)


def _check_metadata(meta: dict[str, str] | None, headers: dict[str, list[str]] | None) -> None:
    if meta is not None and not all(
        isinstance(k, str) and isinstance(v, str) for k, v in meta.items()
    ):
        raise ClientValidationError("meta must map str to str")
    if headers is not None and not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v)
        for k, v in headers.items()
    ):
        raise ClientValidationError("headers must map str to a list of str")


async def open_store(js: JetStream, name: str) -> ObjectStore:
    """Bind to an existing object store (made by any NATS client). Stores made by other clients
    lack ``allow_batched`` (which :func:`create_store` sets): uploads to them use acked publishes
    in a bounded window instead of fast ingest, with the same guarantees (logged once, at info).

    Raises:
        StoreNotFoundError: no such store.
    """
    info = await store_info(js, name)
    marker_ttl = store_config_from_stream(info.config).marker_ttl
    return ObjectStore(
        js,
        name,
        direct=info.config.allow_direct,
        marker_ttl=marker_ttl,
        batched=info.config.allow_batched,
    )


async def store_info(js: JetStream, name: str) -> StreamInfo:
    """The stream info of a store.

    Raises:
        StoreNotFoundError: no such store; JetStreamError: the stream is not an object store.
    """
    validate_bucket_name(name)
    try:
        info = await js.stream_info(stream_name(name))
    except StreamNotFoundError as exc:
        raise StoreNotFoundError(f"object store {name!r} not found", code=exc.code) from exc
    if f"$O.{name}.M.>" not in info.config.subjects:
        raise JetStreamError(f"stream {info.config.name!r} is not an object store")
    return info
