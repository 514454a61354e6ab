"""The upload pipeline: read -> hash (overlapped) -> fast-ingest publish -> meta -> cleanup.

Anything that goes wrong before the meta record is sent purges the new chunks and raises
:class:`UploadFailedError`; the previous version of the object, if any, is untouched until the
new one is complete. The meta record is idempotent (a ``Nats-Msg-Id``), so a lost ack is asked
again; only when that cannot be answered before the deadline is the outcome unknown, and then
the chunks are kept (a meta record may point at them) and :class:`CommitUnknownError` raised.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from nats.nuid import NUID

from jetstream import (
    ClientValidationError,
    CommitUnknownError,
    FastPublisher,
    JetStreamError,
    MessageIdInProcessError,
    NoRespondersError,
    PermissionDeniedError,
    ServerError,
)

from ._errors import UploadFailedError
from ._io import Hasher, Source, chunks_of, known_size
from ._meta import read_record, replace_record
from ._models import ObjectInfo, ObjectMetaOptions, chunk_subject, now_rfc3339

if TYPE_CHECKING:
    from ._store import ObjectStore

__all__ = ["Progress", "upload"]

Progress = Callable[[int, int | None], None]
"""``progress(bytes_done, total_or_None)``, called after each chunk is sent."""


async def upload(
    store: ObjectStore,
    name: str,
    source: Source,
    *,
    ttl_headers: dict[str, str],
    chunk_size: int,
    description: str,
    headers: dict[str, list[str]] | None,
    metadata: dict[str, str] | None,
    progress: Progress | None,
) -> ObjectInfo:
    chunks = chunks_of(source, chunk_size)  # raises TypeError/OSError before anything is sent
    total = known_size(source)
    previous = await read_record(store, name, strict=False)  # the commit is conditional on it
    nuid = NUID().next().decode()
    subject = chunk_subject(store.name, nuid)
    try:
        size, count, digest = await _send_chunks(
            store, subject, chunks, ttl_headers, total, progress
        )
    except BaseException as exc:
        await _abandon(store, subject, name, exc)
    info = ObjectInfo(
        name=name,
        bucket=store.name,
        nuid=nuid,
        size=size,
        mtime=now_rfc3339(),
        chunks=count,
        digest=digest,
        description=description,
        headers=headers,
        metadata=metadata,
        options=ObjectMetaOptions(max_chunk_size=chunk_size),
    )
    in_doubt: list[str] = []  # the Msg-Id of a meta write whose outcome is unknown
    try:
        replaced = await replace_record(
            store, info, ttl_headers, msg_id=nuid, in_doubt=in_doubt, known=previous
        )
    except MessageIdInProcessError as exc:  # an earlier send is in flight: it may be stored
        raise _unknown(name, in_doubt, exc) from exc
    except Exception as exc:
        if in_doubt and not isinstance(exc, _NOT_STORED):
            raise _unknown(name, in_doubt, exc) from exc
        await _abandon(store, subject, name, exc)  # nothing stored: the new chunks go
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


async def _abandon(store: ObjectStore, subject: str, name: str, exc: BaseException) -> NoReturn:
    """Purge the new chunks, then raise: UploadFailedError for an error, anything else
    (a cancellation) as it is."""
    await asyncio.shield(_purge(store, subject))
    if isinstance(exc, Exception) and not isinstance(exc, UploadFailedError):
        raise UploadFailedError(f"upload of {name!r} failed: {exc}") from exc
    raise exc


async def _send_chunks(
    store: ObjectStore,
    subject: str,
    chunks: object,
    ttl_headers: dict[str, str],
    total: int | None,
    progress: Progress | None,
) -> tuple[int, int, str]:
    """Publish every chunk in one fast batch; the last one commits it. Returns (size, chunks,
    digest) once the server confirmed every chunk."""
    hasher = Hasher()
    headers = ttl_headers or None
    size = count = 0
    held: bytes | None = None  # one chunk of look-ahead: the last one carries the commit
    try:
        async with FastPublisher(store._js, gap="fail") as batch:
            async for chunk in chunks:  # type: ignore[attr-defined]
                if held is not None:
                    await batch.add(subject, held, headers)
                    size, count = size + len(held), count + 1
                    _report(progress, size, total)
                await hasher.update(chunk)
                held = chunk
            if held is not None:
                await batch.commit(subject, held, headers)
                size, count = size + len(held), count + 1
                _report(progress, size, total)
        return size, count, await hasher.digest()
    finally:
        hasher.close()


def _report(progress: Progress | None, done: int, total: int | None) -> None:
    if progress is not None:
        progress(done, total)


async def _purge(store: ObjectStore, subject: str) -> None:
    with contextlib.suppress(JetStreamError, OSError):
        await store._js.purge_stream(store.stream, subject=subject)
