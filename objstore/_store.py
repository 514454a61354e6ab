"""ObjectStore: objects in a NATS object store, uploaded over fast-ingest batches."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

from jetstream import (
    AsyncListing,
    ClientValidationError,
    JetStream,
    Keyring,
    OrderedConsumer,
    RekeyReport,
    RequestTimeoutError,
    StreamInfo,
    TTLValue,
)
from jetstream import headers as hdr
from jetstream._protocol.bucket_config import validate_bucket_name

from ._checks import check_record_text, validate_object_name
from ._cleanup import remove_orphans
from ._core import StoreCore, store_info
from ._download import DEFAULT_STALL_TIMEOUT, ChunkReader, check_stall_timeout
from ._encryption import cipher_for
from ._errors import (
    ObjectNotFoundError,
)
from ._files import check_target, save_to_file
from ._finish import run_attempts_to_end
from ._io import Source
from ._links import follow_links
from ._models import (
    DEFAULT_CHUNK_SIZE,
    ObjectInfo,
    ObjectLink,
    StoreStatus,
    store_config_from_stream,
)
from ._rekey import rekey_store
from ._rewrites import delete_object, rename, update_in_place, write_link
from ._upload import Progress, put_object

__all__ = ["ObjectReader", "ObjectStore", "bound_store", "open_store"]

_MAX_CHUNK_SIZE = 8 * 1024 * 1024


_DEFAULT_CLEANUP_AGE = timedelta(minutes=1)
_log = logging.getLogger("objstore")


class ObjectStore:
    """A NATS object store (stream ``OBJ_<name>``); get one from :func:`objstore.create_store`
    or :func:`objstore.open_store`. Objects written here are readable by every NATS client.

    **TTL.** ``put(..., ttl=)`` gives the chunks and the meta record a ``Nats-TTL``, at least one
    whole second and not below the store's ``marker_ttl`` (the server would stretch it to that):
    the object disappears as a whole (its meta last, so a reader never finds a meta without
    chunks except in the last instant, when the read fails with :class:`DigestMismatchError`).
    Rewrites of the meta record (``update_meta``, rename, ``delete``) keep the TTL it has left,
    rounded down to whole seconds, so they never outlive the chunks.

    **Concurrent writers.** Every meta write is conditional on the record it was computed from
    (``Nats-Expected-Last-Subject-Sequence``); on a conflict it reads again and retries, up to
    16 times (then :class:`ObjectChangedError`, nothing written). Racing ``put`` s of one name:
    the last to commit wins, and each purges the chunks of exactly the record it replaced, so
    only the winner's chunks stay.

    **Records by other clients** decode with ADR-20 defaults for omitted fields (nats.js link
    records carry only ``name``, ``bucket`` and ``options``). Anyone who may publish on the
    store writes the records every client reads, so each is checked before any field reaches
    a subject or a size: the nuid one literal subject token, sizes and chunk counts
    non-negative and consistent, its own name and store, link targets valid store names. A
    record that is not ADR-20 JSON or fails a check is :class:`InvalidObjectMetaError` on
    direct access (``info``, reads, rewrites), skipped with a logged warning by
    ``list``/``watch``, makes ``cleanup`` remove nothing while its nuid is not a literal
    token, is written over by ``put`` and removed by ``delete``; nothing is ever purged on
    its word.

    **A deleted store.** Once any client deletes the store, every operation of the handle
    (uploads, downloads, listings and watches running at that moment included) raises
    :class:`StoreNotFoundError` naming it, whatever the server answered; a 503 is first
    confirmed by one stream info request, so an election is waited out as before. A store
    created again under the name is used by the handle's one-shot operations; a watch that
    ran across the delete ends with :class:`StoreNotFoundError`, and so does a download
    (or with :class:`ObjectNotFoundError`, the object not being in the new store).
    """

    def __init__(
        self,
        js: JetStream,
        name: str,
        *,
        direct: bool = True,
        marker_ttl: timedelta | None = None,
        batched: bool | None = None,
        encryption: Keyring | None = None,
        allow_plaintext: bool = False,
    ) -> None:
        self._core = StoreCore(
            js,
            name,
            direct=direct,
            marker_ttl=marker_ttl,
            batched=batched,
            encryption=encryption,
            allow_plaintext=allow_plaintext,
        )

    @property
    def name(self) -> str:
        """The store name."""
        return self._core.name

    @property
    def stream(self) -> str:
        """The backing stream, ``OBJ_<name>``."""
        return self._core.stream

    @property
    def js(self) -> JetStream:
        """The JetStream context this handle reads and writes through."""
        return self._core.js

    def __repr__(self) -> str:
        enc = f" encryption={self._core.cipher.keyring!r}" if self._core.cipher is not None else ""
        return f"<ObjectStore {self.name!r}{enc}>"

    @property
    def encryption(self) -> Keyring | None:
        """The keyring objects are encrypted with (None: stored as given)."""
        return None if self._core.cipher is None else self._core.cipher.keyring

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
        """Store an object from bytes, a path (``str`` or ``PathLike``), a binary file (also
        one read with ``await``: aiofiles, ``asyncio.StreamReader``), or an (async) iterable
        of bytes, replacing any object of that name once complete.

        ``meta`` is free metadata (``metadata`` on the wire), ``progress(done, total)`` is called
        after each chunk (``total`` None when unknown).

        A ``str`` is always a path. A path, or a binary file over a regular file (read from
        where it stands), must not change while it is read: its size and modification time
        are compared with those at open after every read, and the bytes read with that size
        at its end. Pipes, other file objects, async readers and iterables are stored exactly as
        read.

        Raises:
            InvalidObjectNameError, InvalidTTLError, ClientValidationError, WrongTypeError: bad
                input, before anything is sent.
            SourceNotFoundError: no file at the path (to store text, give bytes); also a
                FileNotFoundError.
            UnreadableSourceError: a path that cannot be opened (a directory, no permission);
                also an OSError.
            ValueTooLargeError: the meta record (name, description, headers, ``meta``) would
                not fit the server's max_payload; nothing is read or sent.
            SourceChangedError: the file changed while it was read (an UploadFailedError:
                nothing stored).
            UploadFailedError: the upload failed (no meta written, its chunks removed).
            StoreNotFoundError: the store was deleted (by any client), also during the upload
                (no meta written, its chunks gone with the store).
            CommitUnknownError: the meta record's ack was lost and could not be asked again
                before the connection's ``retry_deadline``; the object may or may not exist.

        Cancelled while chunks are sent, the upload removes them; cancelled once every chunk
        is stored, the commit (meta record, then the replaced version's chunks purged) still
        finishes in the background: either way nothing is left behind.
        """
        return await put_object(
            self._core,
            name,
            source,
            ttl=ttl,
            meta=meta,
            description=description,
            headers=headers,
            chunk_size=chunk_size,
            progress=progress,
        )

    async def delete(self, name: str) -> None:
        """Delete an object: a ``deleted`` meta record replaces it (only if it is still the
        record read; else the newer one is deleted), then its chunks go. The ``deleted`` record
        keeps the TTL the object had left.

        A meta record that is unreadable or fails its checks (a hostile or broken peer's) is
        deleted too, without purging anything on its word: chunks it may have had are left to
        :meth:`cleanup`.

        Raises:
            ObjectNotFoundError: no such object.
            ObjectChangedError: the record changed under every retry; nothing was written.
            StoreNotFoundError: the store was deleted (by any client).

        Once started it runs to its end even when cancelled (in the background): a tombstone
        is never left without the purge of its chunks.
        """
        validate_object_name(name)
        # Run to the end even if cancelled: a tombstone without the purge would orphan chunks.
        async with self._core.missing:
            await run_attempts_to_end(
                lambda caller_gone: delete_object(self._core, name, caller_gone)
            )

    async def update_meta(
        self,
        name: str,
        *,
        new_name: str | None = None,
        description: str | None = None,
        meta: dict[str, str] | None = None,
        headers: dict[str, list[str]] | None = None,
    ) -> ObjectInfo:
        """Change an object's name, description, metadata or headers (not its content); the
        object keeps the TTL it has left.

        The change applies to the object's current record: a rewrite is conditional on the
        record it read, and when another writer (a ``put``, a ``delete``) got in between, the
        record is read again and the change applied to that (a ``put`` replacing the object
        wins its content, the update keeps its names and metadata).

        A rename first writes ``new_name`` (only if that name is still free), then replaces
        ``name`` by a ``deleted`` record (only if it is still the record copied; otherwise the
        copy is withdrawn and the rename retried). A crash between the two leaves the object
        under both names, never under none; a cancelled rename still finishes (in the
        background), so cancelling never does that.

        Raises:
            ObjectNotFoundError: no such object; ObjectExistsError: ``new_name`` is taken.
            ObjectChangedError: the record changed under every retry; nothing was written.
            InvalidObjectNameError, ClientValidationError: bad input, nothing written.
            StoreNotFoundError: the store was deleted (by any client).
        """
        validate_object_name(name)
        check_record_text(description, meta, headers)
        target = new_name if new_name is not None else name
        validate_object_name(target)

        def change(info: ObjectInfo) -> ObjectInfo:
            return ObjectInfo(
                name=target,
                bucket=self.name,
                nuid=info.nuid,
                size=info.size,
                mtime=datetime.now(UTC),
                chunks=info.chunks,
                digest=info.digest,
                description=info.description if description is None else description,
                headers=info.headers if headers is None else _keep_marker(info.headers, headers),
                metadata=info.metadata if meta is None else meta,
                options=info.options,
            )

        async with self._core.missing:
            if target == name:
                return await update_in_place(self._core, name, change)
            # Run to the end even if cancelled: never a copy without the source's tombstone.
            return await run_attempts_to_end(
                lambda caller_gone: rename(self._core, name, target, change, caller_gone)
            )

    async def add_link(self, name: str, target: str | ObjectInfo) -> ObjectInfo:
        """Make ``name`` a link to another object (of this store, or of another when
        ``target`` is an :class:`ObjectInfo` from it). Reads of ``name`` follow the link.

        Raises:
            ObjectNotFoundError: the target does not exist; ObjectExistsError: ``name`` is an
                object that is not a link; ClientValidationError: the target is a link;
                InvalidBucketNameError, InvalidObjectNameError: a target ``ObjectInfo`` with
                an invalid store or object name (nothing written).
            ObjectChangedError: ``name`` changed under every retry; nothing was written.
            StoreNotFoundError: the store was deleted (by any client).
        """
        validate_object_name(name)
        info = target if isinstance(target, ObjectInfo) else await self.info(target)
        validate_bucket_name(info.bucket)  # a caller's ObjectInfo: nothing written on a bad one
        validate_object_name(info.name)
        if info.deleted:
            raise ObjectNotFoundError(info.name)
        if info.is_link:
            raise ClientValidationError("a link cannot point to another link")
        return await self._write_link(name, ObjectLink(bucket=info.bucket, name=info.name))

    async def add_bucket_link(self, name: str, store: ObjectStore) -> ObjectInfo:
        """Make ``name`` a link to a whole store.

        Raises:
            ObjectExistsError: ``name`` is an object that is not a link.
            ObjectChangedError: ``name`` changed under every retry; nothing was written.
            StoreNotFoundError: the store was deleted (by any client).
        """
        validate_object_name(name)
        return await self._write_link(name, ObjectLink(bucket=store.name))

    async def _write_link(self, name: str, link: ObjectLink) -> ObjectInfo:
        async with self._core.missing:
            return await write_link(self._core, name, link)

    async def rekey(self) -> RekeyReport:
        """Re-encrypt every live object sealed with a key other than the keyring's primary
        (and, with ``allow_plaintext``, every plain object) with the primary: each is streamed
        from its own chunks into a new upload that commits only if its meta record is still
        the one read (an object replaced, renamed or deleted meanwhile is left to its writer:
        ``changed``). Names, descriptions, metadata, headers and the TTL left are kept; the
        nuid changes. Safe to interrupt and run again: it continues with what is left.
        Objects stay readable throughout (keep the old keys in the ring until it returns).

        Raises:
            ClientValidationError: the store was opened without ``encryption=``.
            StoreNotFoundError: the store was deleted (by any client).
            JetStreamError: a listing, read or upload failed (run it again to continue).
        """
        if self._core.cipher is None:
            raise ClientValidationError(f"store {self.name!r} was opened without encryption=")
        async with self._core.missing:
            return await rekey_store(self._core, self._core.cipher)

    async def seal(self) -> None:
        """Make the store read-only, for good.

        Raises:
            StoreNotFoundError: the store was deleted (by any client).
        """
        async with self._core.missing:
            info = await self._core.js.stream_info(self.stream)
            info.config.sealed = True
            await self._core.js.update_stream(info.config)

    async def cleanup(self, *, older_than: timedelta = _DEFAULT_CLEANUP_AGE) -> int:
        """Remove chunks no meta record refers to (left by a crashed or killed uploader) whose
        newest chunk is older than ``older_than`` (so uploads in progress are left alone).
        Returns how many objects' chunks were removed. While a meta record is unreadable (it
        might refer to any chunks) nothing is removed and a warning is logged.

        Raises:
            JetStreamError: the store could not be scanned or purged.
            StoreNotFoundError: the store was deleted (by any client).
        """
        async with self._core.missing:
            return await remove_orphans(self._core, older_than)

    # -- reading ------------------------------------------------------------------------------

    async def info(self, name: str, *, include_deleted: bool = False) -> ObjectInfo:
        """An object's meta record (as any ADR-20 client wrote it: omitted fields default).

        Raises:
            ObjectNotFoundError: no such object (or deleted, unless ``include_deleted``).
            InvalidObjectMetaError: its meta record is not ADR-20 JSON or fails its checks.
            StoreNotFoundError: the store was deleted (by any client).
        """
        validate_object_name(name)
        async with self._core.missing:
            info = await self._core.current_info(name, include_deleted=include_deleted)
        if info is None:
            raise ObjectNotFoundError(name)
        return info

    def open(self, name: str, *, stall_timeout: float = DEFAULT_STALL_TIMEOUT) -> _OpeningReader:
        """``async with store.open(name) as reader: async for chunk in reader: ...``; links are
        followed (at most :data:`objstore.MAX_LINK_DEPTH`, loops refused). Memory stays around
        8 MiB whatever the object size.

        A read ends with the whole object or an error in bounded time: an object deleted or
        replaced while it is read fails within about a second of the reader running out of
        buffered chunks; chunks missing when the read starts (purged, or never stored by a
        peer whose record lies) fail it at once; more bytes than the record promises fail it
        at the first chunk too many; a read that gets no chunk for ``stall_timeout`` seconds
        (default 30; e.g. the server down) fails then.

        Raises:
            ClientValidationError: ``stall_timeout`` is not a positive number (at once), or
                ``name`` is a link to a whole store (on entering).
            ObjectNotFoundError: (on entering) no such object, or a link to a missing one;
                (while reading) the object was deleted or replaced.
            InvalidObjectMetaError: (on entering) a record on the way is unreadable or fails
                its checks (see :class:`InvalidObjectMetaError`); nothing was read.
            ObjectLinkError: (on entering) the links loop or chain too deep.
            DigestMismatchError: (while reading) corrupt or incomplete.
            RequestTimeoutError: (while reading) no chunk for ``stall_timeout`` seconds.
            StoreNotFoundError: the store was deleted (on entering, or while reading); a link
                into a deleted store names that store.
        """
        validate_object_name(name)
        check_stall_timeout(stall_timeout)
        return _OpeningReader(self, name, stall_timeout)

    async def get_bytes(self, name: str, *, stall_timeout: float = DEFAULT_STALL_TIMEOUT) -> bytes:
        """The whole object in memory (``stall_timeout`` as in :meth:`open`).

        Raises:
            ObjectNotFoundError: no such object, or deleted or replaced while being read;
            DigestMismatchError: corrupt or incomplete; RequestTimeoutError: no chunk for
            ``stall_timeout`` seconds; ClientValidationError: a bad ``stall_timeout``;
            InvalidObjectMetaError, ObjectLinkError: as :meth:`open`.
            StoreNotFoundError: as :meth:`open`.
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
        """Download into ``path``: written to a new temporary file next to it (created
        exclusively under a random name, never following a link) and renamed onto ``path``
        once the digest matches and the bytes are synced, so ``path`` never holds a partial or
        corrupt object and nothing planted in a shared directory is written through (a symlink
        at ``path`` is replaced, not followed). A failed or cancelled download removes only
        its own temporary file; ``path`` and every other file stay as they were.
        ``stall_timeout`` as in :meth:`open`.

        Raises:
            ObjectNotFoundError, DigestMismatchError, RequestTimeoutError, ClientValidationError,
            InvalidObjectMetaError, ObjectLinkError, StoreNotFoundError: as :meth:`get_bytes`;
            OSError from the file system (e.g. the directory is not writable).
            ClientValidationError: ``path`` is not a str path, holds a NUL or names no file
                (``""``, ``"."``, ``".."``, ``"/"``); nothing is read or created.
        """
        target = check_target(path)
        opening = self.open(name, stall_timeout=stall_timeout)  # bad input: before any file
        async with opening as reader:
            await save_to_file(reader, target, progress)
        return reader.info

    def list(self, *, include_deleted: bool = False) -> AsyncListing[ObjectInfo]:
        """Every object's meta record (deleted ones only with ``include_deleted``): ``async
        for`` or ``await`` (a list); unreadable records are skipped with a warning on the
        ``objstore`` logger.

        Raises:
            JetStreamError: the store could not be scanned.
            StoreNotFoundError: the store was deleted, also while it was listed.
        """
        return AsyncListing(self._infos(include_deleted))

    async def _infos(self, include_deleted: bool) -> AsyncIterator[ObjectInfo]:
        infos = self._core.infos(include_deleted=include_deleted)
        async with self._core.missing, contextlib.aclosing(infos):  # left early: closed now
            async for info in infos:
                yield info

    async def status(self) -> StoreStatus:
        """The store's configuration, size and sealed state.

        Raises:
            StoreNotFoundError: the store was deleted (by any client).
        """
        info = await store_info(self._core.js, self.name)
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
        first the current state unless ``updates_only``. Unreadable records are skipped with a
        warning.

        Raises:
            ClientValidationError: both ``include_history`` and ``updates_only``.
            StoreNotFoundError: the store was deleted, also while it was watched (even if a
                store of its name was created again meanwhile).
        """
        if include_history and updates_only:
            raise ClientValidationError("include_history and updates_only exclude each other")
        policy = "all" if include_history else "new" if updates_only else "last_per_subject"
        consumer = OrderedConsumer(
            self._core.js,
            self.stream,
            filter_subjects=[f"$O.{self.name}.M.>"],
            deliver_policy=policy,
            detect_recreation=True,  # a watch never goes on in a store created again
        )
        async with self._core.missing, consumer:
            async for message in consumer:
                info = self._core.readable(message.subject, message.data, message.headers)
                if info is not None:
                    yield info


class ObjectReader(ChunkReader):
    """``async with store.open(name) as reader: async for chunk in reader: ...``

    A read ends with the whole object or an error, in bounded time: when no chunk arrives for
    :data:`IDLE_CHECK` seconds (or the server counts fewer chunks left than the meta promises)
    the reader asks whether its next chunk is still stored, and fails at once when it is not
    (the meta record then tells why); a read that gets no chunk for ``stall_timeout`` seconds
    (the server down, say) fails then. An object renamed while it is read still reads whole.

    Raises (while iterating):
        DecryptionError, UnknownKeyIdError, PlaintextValueError: (encrypted stores) a chunk
            that does not decrypt: changed, reordered, dropped, from another object or store,
            the object cut short, the wrong key; or a plain object (see ``allow_plaintext``).
        ObjectNotFoundError: the object was deleted or replaced while being read.
        StoreNotFoundError: the store was deleted while the object was read.
        DigestMismatchError: chunks are missing although the meta record is unchanged (e.g.
            expired, or never stored by a lying peer), more bytes arrive than the record
            promises, or, after the last chunk, the size, chunk count or SHA-256 digest differ
            from the object's meta (an encrypted object's chunks are checked by their tags
            instead of the digest).
        RequestTimeoutError: no chunk for ``stall_timeout`` seconds.

    Raises (on construction): InvalidObjectMetaError when ``info``'s nuid is not one literal
    subject token or its counts are off; ClientValidationError for a bad ``stall_timeout``.
    """

    def __init__(
        self, store: ObjectStore, info: ObjectInfo, *, stall_timeout: float = DEFAULT_STALL_TIMEOUT
    ) -> None:
        super().__init__(store._core, info, stall_timeout=stall_timeout)


class _OpeningReader:
    """What ``open()`` returns: enter it to resolve links and get an :class:`ObjectReader`."""

    def __init__(self, store: ObjectStore, name: str, stall_timeout: float) -> None:
        self._store = store
        self._name = name
        self._stall_timeout = stall_timeout
        self._reader: ObjectReader | None = None

    async def __aenter__(self) -> ObjectReader:
        # Reads retry until the context's retry_deadline; the stall timeout bounds a read
        # from its start, the meta records it reads first included.
        try:
            async with asyncio.timeout(self._stall_timeout):
                info = await self._store.info(self._name)
                store, info = await follow_links(self._store, info, _open_linked)
        except TimeoutError:
            raise RequestTimeoutError(
                f"object {self._name!r}: its meta record did not come within the "
                f"stall_timeout of {self._stall_timeout:g}s"
            ) from None
        self._reader = ObjectReader(store, info, stall_timeout=self._stall_timeout)
        return await self._reader.__aenter__()

    async def __aexit__(self, *exc: object) -> None:
        if self._reader is not None:
            await self._reader.__aexit__(None, None, None)


async def _open_linked(current: ObjectStore, name: str) -> ObjectStore:
    # A link into another store reads it with this store's keys (its chunks are bound to
    # the store they are in, so the ring must hold the key they were sealed with).
    cipher = current._core.cipher
    if cipher is None:
        return await open_store(current._core.js, name)
    return await open_store(
        current._core.js, name, encryption=cipher.keyring, allow_plaintext=cipher.allow_plaintext
    )


def _keep_marker(
    old: dict[str, list[str]] | None, new: dict[str, list[str]]
) -> dict[str, list[str]]:
    """``new`` headers for a record, keeping the ``Jetstore-Enc`` marker of an encrypted
    object (it tells peers the chunks are ciphertext) unless ``new`` sets one itself."""
    marker = (old or {}).get(hdr.ENCRYPTION)
    if marker is None or hdr.ENCRYPTION in new:
        return new
    return {**new, hdr.ENCRYPTION: marker}


async def open_store(
    js: JetStream,
    name: str,
    *,
    encryption: Keyring | None = None,
    allow_plaintext: bool = False,
) -> ObjectStore:
    """Bind to an existing object store (made by any NATS client). Stores made by other clients
    lack ``allow_batched`` (which :func:`create_store` sets): uploads to them use acked publishes
    in a bounded window instead of fast ingest, with the same guarantees (logged once, at info).

    With ``encryption`` (a :class:`jetstream.Keyring`) objects are encrypted chunk by chunk on
    the client (AES-256-GCM, each chunk bound to the store, the object's nuid, its index and
    the last-chunk mark) and decrypted while read; a plain object raises
    :class:`jetstream.PlaintextValueError` when read unless ``allow_plaintext``. The meta
    record (name, size and digest of the stored bytes, metadata) stays plain. See
    docs/CODECS.md, "Encrypted objects".

    Raises:
        ClientValidationError: ``encryption`` is not a Keyring, or ``allow_plaintext``
            without it; nothing is sent.
        StoreNotFoundError: no such store.
    """
    cipher_for(encryption, allow_plaintext)  # bad options: before anything is sent
    info = await store_info(js, name)
    return bound_store(js, name, info, encryption=encryption, allow_plaintext=allow_plaintext)


def bound_store(
    js: JetStream,
    name: str,
    info: StreamInfo,
    *,
    encryption: Keyring | None = None,
    allow_plaintext: bool = False,
) -> ObjectStore:
    """A handle on the store whose stream ``info`` describes, with the options it records."""
    return ObjectStore(
        js,
        name,
        direct=info.config.allow_direct,
        marker_ttl=store_config_from_stream(info.config).marker_ttl,
        batched=info.config.allow_batched,
        encryption=encryption,
        allow_plaintext=allow_plaintext,
    )
