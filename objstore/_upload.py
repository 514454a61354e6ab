"""The upload pipeline: read -> hash (overlapped) -> publish -> meta -> cleanup.

Chunks go out in one fast-ingest batch where the stream has ``allow_batched`` (stores made by
:func:`objstore.create_store`), else as acked publishes in a bounded window (stores made by other
clients); either way every chunk is acknowledged before the meta record is written.

Anything that goes wrong before the meta record is sent purges the new chunks, once the server
settled every chunk still in flight (else those would be stored after the purge), and raises
:class:`UploadFailedError` (a source file that changed while it was read among them:
:class:`SourceChangedError`, raised by its chunks before the last one is sent); a cancelled
upload cleans up the same way and stays cancelled. The previous version of the object, if any,
is untouched until the new one is complete. The meta
record is idempotent (a ``Nats-Msg-Id``), so a lost ack is asked again; only when that cannot be
answered before the deadline is the outcome unknown, and then the chunks are kept (a meta record
may point at them) and :class:`CommitUnknownError` raised.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import NoReturn, TypeAlias

import msgspec
import nats.errors
from nats.nuid import NUID

from jetstream import (
    AckedPublisher,
    BatchPublishDisabledError,
    ClientValidationError,
    CommitUnknownError,
    FastPublisher,
    JetStreamError,
    MessageIdInProcessError,
    NoRespondersError,
    PermissionDeniedError,
    ServerError,
    StreamNotFoundError,
    TTLValue,
)
from jetstream import headers as hdr
from jetstream._protocol.ttl import format_ttl
from jetstream._resource import aclose_iterator

from ._checks import check_chunk_size, check_record_text, validate_object_name
from ._core import StoreCore
from ._download import WINDOW_BYTES
from ._encryption import OVERHEAD
from ._errors import DuplicateObjectNameError, UploadFailedError
from ._finish import CallerGone, run_attempts_to_end, run_to_end
from ._io import Source, chunks_of, digest_text
from ._meta import MetaRecord, check_record_fits, read_record, replace_record, write_record
from ._models import DEFAULT_CHUNK_SIZE, ObjectInfo, ObjectMetaOptions, chunk_subject
from ._once import WRITE_HEADER, StoredAlready, WriteTag

__all__ = ["Progress", "put_object", "upload"]

Sealer = Callable[[int, bool, bytes], bytes]
"""``seal(index, last, chunk) -> stored bytes``: a chunk's encryption."""

Progress = Callable[[int, int | None], None]
"""``progress(bytes_done, total_or_None)``, called after each chunk is sent."""


async def put_object(
    store: StoreCore,
    name: str,
    source: Source,
    *,
    ttl: TTLValue | None = None,
    meta: dict[str, str] | None = None,
    description: str = "",
    headers: dict[str, list[str]] | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    progress: Progress | None = None,
    once: WriteTag | None = None,
) -> ObjectInfo:
    """:meth:`ObjectStore.put` (which says what it raises), on the store's core; with
    ``once``, an upload of a write whose attempts may repeat (``_once``: StoredAlready when
    an earlier attempt stored it)."""
    validate_object_name(name)
    chunk_size = check_chunk_size(chunk_size)
    check_record_text(description, meta, headers)
    ttl_headers = {hdr.TTL: format_ttl(store.checked_ttl(ttl))} if ttl is not None else {}
    # A chunk and its headers must fit the server's max_payload (it would drop the
    # connection otherwise): shrink the chunks to fit (sealed chunks are larger).
    chunk_size = min(chunk_size, store.chunk_room(ttl_headers))
    async with store.missing:
        return await upload(
            store,
            name,
            source,
            ttl_headers=ttl_headers,
            chunk_size=chunk_size,
            description=description,
            headers=headers,
            metadata=meta,
            progress=progress,
            once=once,
        )


async def upload(
    store: StoreCore,
    name: str,
    source: Source,
    *,
    ttl_headers: dict[str, str],
    chunk_size: int,
    description: str,
    headers: dict[str, list[str]] | None,
    metadata: dict[str, str] | None,
    progress: Progress | None,
    replacing: MetaRecord | None = None,
    once: WriteTag | None = None,
) -> ObjectInfo:
    """Upload ``source`` as ``name``; with ``replacing`` (rekey) only if that record is still
    the name's record when the upload commits (else UploadFailedError from a
    WrongLastSequenceError, the new chunks removed). With ``once`` the record carries the tag,
    and a record found carrying it (before the chunks are sent, or at the commit) raises
    StoredAlready, nothing of this upload stored (see ``_once``)."""
    cipher = store.cipher
    if once is not None:
        headers = {**(headers or {}), WRITE_HEADER: [once.text]}
    stored_chunk_size = chunk_size + OVERHEAD if cipher is not None else chunk_size
    nuid = NUID().next().decode()
    draft = ObjectInfo(
        name=name,
        bucket=store.name,
        nuid=nuid,
        size=0,
        mtime=None,
        chunks=0,
        description=description,
        headers={**(headers or {}), **cipher.meta_headers()} if cipher is not None else headers,
        metadata=metadata,
        options=ObjectMetaOptions(max_chunk_size=stored_chunk_size),
    )
    check_record_fits(store, draft, ttl_headers)  # not after the whole object was sent
    chunks, total = chunks_of(source, chunk_size)  # bad sources raise before anything is sent
    try:
        previous = await read_record(store, name, strict=False)  # the commit depends on it
        _check_once(once, previous)
        publisher = await _publisher(store, stored_chunk_size)
    except BaseException:
        await aclose_iterator(chunks)  # from here on, _send_chunks closes them
        raise
    subject = chunk_subject(store.name, nuid)
    seal: Sealer | None = None
    chunk_headers = ttl_headers
    if cipher is not None:
        chunk_headers = {**ttl_headers, **cipher.chunk_headers()}  # the same on every chunk
        sealer = cipher.keyring.sealer()
        seal = functools.partial(cipher.seal, sealer, cipher.bind(sealer, store.name, nuid))
    try:
        size, count, digest = await _send_chunks(
            publisher, subject, chunks, chunk_headers, total, progress, seal
        )
    except BaseException as exc:
        await _abandon(store, subject, name, exc, publisher)
    info = msgspec.structs.replace(
        draft, size=size, mtime=datetime.now(UTC), chunks=count, digest=digest
    )
    # From here the meta record may be stored at any moment, and once it is, the chunks of the
    # record it replaced must go: the commit runs to its end even if the upload is cancelled
    # (a cancelled put then either stored the object whole or left nothing; never orphans).
    if replacing is not None:
        return await run_to_end(_commit_over(store, info, ttl_headers, replacing, subject))
    return await run_attempts_to_end(
        lambda caller_gone: _commit(store, info, ttl_headers, previous, subject, caller_gone, once)
    )


def _check_once(once: WriteTag | None, record: MetaRecord | None) -> None:
    """Raises StoredAlready when ``record`` is the one ``once`` stored (DuplicateObjectNameError
    when another part of its write stored the name)."""
    if once is not None and record is not None and record.readable and once.holds(record.info):
        raise StoredAlready(record.info)


async def _commit_over(
    store: StoreCore,
    info: ObjectInfo,
    ttl_headers: dict[str, str],
    replacing: MetaRecord,
    subject: str,
) -> ObjectInfo:
    """Write the meta record only over ``replacing`` (one conditional write, no retry), then
    purge the chunks it named; when another write came first, purge the new chunks instead."""
    try:
        await write_record(store, info, ttl_headers, expected=replacing.seq, msg_id=info.nuid)
    except MessageIdInProcessError as exc:
        raise _unknown(info.name, [info.nuid], exc) from exc
    except Exception as exc:
        if not isinstance(exc, _NOT_STORED):
            raise _unknown(info.name, [info.nuid], exc) from exc
        await _abandon(store, subject, info.name, exc)  # WrongLastSequenceError among them
    await _purge(store, chunk_subject(store.name, replacing.info.nuid))
    return info


async def _commit(
    store: StoreCore,
    info: ObjectInfo,
    ttl_headers: dict[str, str],
    previous: MetaRecord | None,
    subject: str,
    caller_gone: CallerGone,
    once: WriteTag | None = None,
) -> ObjectInfo:
    """Write the meta record, then purge the chunks of the record it replaced; when the meta
    record was surely not stored, purge the new chunks instead (UploadFailedError)."""
    in_doubt: list[str] = []  # the Msg-Id of a meta write whose outcome is unknown
    try:
        replaced = await replace_record(
            store,
            info,
            ttl_headers,
            msg_id=info.nuid,
            in_doubt=in_doubt,
            known=previous,
            caller_gone=caller_gone,
            check=functools.partial(_check_once, once),
        )
    except MessageIdInProcessError as exc:  # an earlier send is in flight: it may be stored
        raise _unknown(info.name, in_doubt, exc) from exc
    except Exception as exc:
        if in_doubt and not isinstance(exc, _NOT_STORED):
            raise _unknown(info.name, in_doubt, exc) from exc
        await _abandon(store, subject, info.name, exc)  # nothing stored: the new chunks go
    # The new record is live: the chunks of the one it replaced (read right before the write
    # that succeeded, so never a record another put wrote meanwhile) go.
    if replaced is not None and not replaced.deleted and not replaced.is_link and replaced.nuid:
        await _purge(store, chunk_subject(store.name, replaced.nuid))
    return info


# Errors the server answered with (or that stopped the request before it was sent): the meta
# record was not stored. Anything else (a timeout past the deadline) leaves it unknown.
_NOT_STORED = (ServerError, ClientValidationError, PermissionDeniedError, NoRespondersError)


def _unknown(name: str, msg_ids: list[str], exc: Exception) -> CommitUnknownError:
    return CommitUnknownError(
        f"upload of {name!r}: whether its meta record was stored is unknown ({exc}); "
        "its chunks are kept, and cleanup() removes them if it was not",
        msg_ids=list(msg_ids),
    )


_Publisher: TypeAlias = FastPublisher | AckedPublisher


async def _publisher(store: StoreCore, chunk_size: int) -> _Publisher:
    """Fast ingest where the stream allows it; acked publishes in a window of about
    WINDOW_BYTES otherwise (stores made by other clients have no ``allow_batched``)."""
    if await store.fast_ingest():
        return FastPublisher(store.js, gap="fail")
    return AckedPublisher(store.js, window=max(2, min(256, WINDOW_BYTES // chunk_size)))


async def _abandon(
    store: StoreCore,
    subject: str,
    name: str,
    exc: BaseException,
    publisher: _Publisher | None = None,
) -> NoReturn:
    """Settle what was sent, purge the new chunks, then raise: StoreNotFoundError when the
    store is gone, UploadFailedError for any other error, anything else (a cancellation) as
    it is.

    The purge waits for the publisher to settle: chunks still in flight would otherwise be
    stored after it. The cleanup is shielded (a cancelled upload still cleans up) and bounded
    by the connection's timeouts; cancelled again, it finishes in the background."""
    store_gone = await run_to_end(_settle_and_purge(store, subject, publisher))
    if store_gone and isinstance(exc, Exception):  # whatever the upload got, that is why
        raise store.missing.error() from exc
    if isinstance(exc, BatchPublishDisabledError):
        store.batched = False  # the stream changed since it was checked: acked next time
        raise UploadFailedError(
            f"upload of {name!r} failed: the stream {store.stream} has no allow_batched "
            f"(changed since it was checked); uploads now use acked publishes, retry it: {exc}"
        ) from exc
    if isinstance(exc, Exception) and not isinstance(exc, _PASSED):
        raise UploadFailedError(f"upload of {name!r} failed: {exc}") from exc
    raise exc


# Raised as they are: what they say already implies that nothing of this upload is stored.
_PASSED = (UploadFailedError, StoredAlready, DuplicateObjectNameError)


async def _settle_and_purge(store: StoreCore, subject: str, publisher: _Publisher | None) -> bool:
    """True when the purge found the store gone (and the chunks with it)."""
    if publisher is not None:
        await publisher.abandon()
    return await _purge(store, subject)


async def _send_chunks(
    publisher: _Publisher,
    subject: str,
    chunks: AsyncIterator[bytes],
    headers: dict[str, str],
    total: int | None,
    progress: Progress | None,
    seal: Sealer | None = None,
) -> tuple[int, int, str]:
    """Publish every chunk; the last one commits. Returns (size, chunks, digest) of what is
    stored once the server confirmed every chunk. With ``seal`` each chunk is encrypted first
    (the look-ahead tells which one is last), and an empty object is one sealed empty chunk.
    On failure the caller abandons the publisher (never here: the cleanup must survive a
    cancellation)."""
    # Inline: hashing in a thread (one hop per chunk) measured 0.51-0.69x of the no-ack
    # ceiling at 128 MiB against 0.75-0.89x inline, with twice the CPU (GIL hand-offs).
    sha = hashlib.sha256()
    size = count = done = 0
    held: bytes | None = None  # one chunk of look-ahead: the last one carries the commit

    async def send(chunk: bytes, last: bool) -> None:
        nonlocal size, count, done
        data = chunk if seal is None else seal(count, last, chunk)
        sha.update(data)  # the digest covers what is stored: peers verify it
        if last:
            await publisher.commit(subject, data, headers or None)
        else:
            await publisher.add(subject, data, headers or None)
        size, count, done = size + len(data), count + 1, done + len(chunk)
        _report(progress, done, total)

    try:
        async for chunk in chunks:
            if held is not None:
                await send(held, False)
            held = chunk
        if held is None and seal is not None:
            held = b""  # encrypted objects have a last chunk to authenticate
        if held is not None:
            await send(held, True)
        return size, count, digest_text(sha.digest())
    finally:
        await aclose_iterator(chunks)  # a path source's file is closed now, not when collected


def _report(progress: Progress | None, done: int, total: int | None) -> None:
    if progress is not None:
        progress(done, total)


async def _purge(store: StoreCore, subject: str) -> bool:
    """Best effort: what a failed purge leaves, cleanup() removes; its error must never hide
    the upload's own (a closed connection included). True when the store is gone."""
    try:
        await store.js.purge_stream(store.stream, subject=subject)
    except StreamNotFoundError:
        return True
    except (JetStreamError, nats.errors.Error, OSError):
        pass
    return False
