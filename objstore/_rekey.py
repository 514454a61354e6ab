"""``ObjectStore.rekey()``: re-upload every live object sealed with an older key of the ring
(or plain, while migrating) under the primary key, streamed from its own chunks (memory stays
bounded), committed only over the record it was read from: an object someone replaces,
renames or deletes meanwhile is theirs (the new chunks are removed). Idempotent: run again
after an interruption, it continues with what is left.

No window where an object is unreadable: the old record and chunks stay until the new record
replaces them (the ring must still hold the old key until then).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from jetstream import (
    DecryptionError,
    MessageNotFoundError,
    RekeyReport,
    ValueTooLargeError,
    WrongLastSequenceError,
)

from ._core import StoreCore
from ._download import ChunkReader
from ._encryption import ChunkCipher
from ._errors import ObjectNotFoundError, UploadFailedError
from ._meta import MetaRecord, read_record
from ._models import DEFAULT_CHUNK_SIZE, ObjectInfo, chunk_subject
from ._upload import upload

__all__ = ["rekey_store"]

_log = logging.getLogger("objstore")


async def rekey_store(store: StoreCore, cipher: ChunkCipher) -> RekeyReport:
    """Rewrite every live object not sealed with ``cipher``'s primary key (see module docs)."""
    names = [info.name async for info in store.infos(include_deleted=False)]  # first: not ours
    report = RekeyReport()
    for name in names:
        report += await _rekey_object(store, cipher, name)
    return report


async def _rekey_object(store: StoreCore, cipher: ChunkCipher, name: str) -> RekeyReport:
    record = await read_record(store, name, strict=False)
    if record is None or not record.live:
        return RekeyReport(changed=1)  # deleted (or expiring) since it was listed
    if not record.readable or record.info.is_link:
        return RekeyReport()  # links have no chunks; unreadable records are left alone
    try:
        key_id = await _key_id(store, cipher, record.info)
    except (DecryptionError, MessageNotFoundError) as exc:
        _log.warning("store %r: rekey skips object %r: %s", store.name, name, exc)
        return RekeyReport(skipped=1)
    if key_id == cipher.keyring.primary:
        return RekeyReport(current=1)
    if key_id is None and not cipher.allow_plaintext:
        _log.warning("store %r: rekey skips plain object %r", store.name, name)
        return RekeyReport(skipped=1)
    return await _reupload(store, record)


async def _key_id(store: StoreCore, cipher: ChunkCipher, info: ObjectInfo) -> str | None:
    """The key id of the object's first chunk (None: plain, or no chunks).

    Raises:
        DecryptionError: a malformed header. MessageNotFoundError: its chunks are gone.
    """
    if info.chunks == 0:
        return None
    subject = chunk_subject(store.name, info.nuid)
    first = await store.js.get_next_message(store.stream, subject, 1, direct=False)
    return cipher.keyring.key_id_of(first.headers)


async def _reupload(store: StoreCore, record: MetaRecord) -> RekeyReport:
    info = record.info
    chunk_size = min(DEFAULT_CHUNK_SIZE, store.chunk_room(record.ttl_headers))
    try:
        await upload(
            store,
            info.name,
            _plaintext(store, info),
            ttl_headers=record.ttl_headers,
            chunk_size=chunk_size,
            description=info.description,
            headers=info.headers,
            metadata=info.metadata,
            progress=None,
            replacing=record,
        )
    except ValueTooLargeError as exc:  # its record would outgrow max_payload: left as it is
        _log.warning("store %r: rekey skips object %r: %s", store.name, info.name, exc)
        return RekeyReport(skipped=1)
    except UploadFailedError as exc:
        cause = exc.__cause__
        if isinstance(cause, WrongLastSequenceError | ObjectNotFoundError):
            return RekeyReport(changed=1)  # replaced, renamed or deleted meanwhile: theirs
        if isinstance(cause, DecryptionError):
            _log.warning("store %r: rekey skips object %r: %s", store.name, info.name, cause)
            return RekeyReport(skipped=1)
        raise
    return RekeyReport(rekeyed=1)


async def _plaintext(store: StoreCore, info: ObjectInfo) -> AsyncIterator[bytes]:
    """The object's plaintext, chunk by chunk, digest and authentication checked."""
    async with ChunkReader(store, info) as reader:
        async for chunk in reader:
            yield chunk
