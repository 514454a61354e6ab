"""Uploading many objects from one process (a Spark partition, a script): one connection, a
few uploads at a time, one row of outcome per object; a failed object does not stop the others.
Spark-free, so it is tested on its own and used by ``objstore.spark``."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from collections.abc import Iterable, Sequence

from jetstream import JetStreamError, Keyring
from jetstream._crypto.hidden_payload import PayloadHidden
from jetstream._errors import check_count
from jetstream._options import ConnectionOptions

from ._checks import check_chunk_size
from ._core import StoreCore, open_core
from ._encryption import cipher_for
from ._errors import DuplicateObjectNameError, StoreNotFoundError
from ._io import Source
from ._models import DEFAULT_CHUNK_SIZE, ObjectInfo
from ._once import StoredAlready, WriteTag
from ._paths import check_root, open_under_root
from ._upload import put_object

__all__ = ["UploadItem", "UploadOutcome", "upload_into", "upload_many"]


@dataclasses.dataclass(frozen=True, repr=False)
class UploadItem(PayloadHidden):
    """One object to store: from ``path`` (streamed from disk) or ``data`` (in memory; the
    repr shows its size only)."""

    name: str
    path: str | None = None
    data: bytes | None = None
    once: WriteTag | None = None
    """Part of a write whose attempts may repeat: stored once (see ``objstore._once``)."""

    _payload = "data"


@dataclasses.dataclass(frozen=True)
class UploadOutcome:
    """What happened to one object: its size, digest and chunks, or the error."""

    name: str
    size: int | None = None
    digest: str | None = None
    chunks: int | None = None
    error: str | None = None
    found: bool = False
    """The item's ``once`` tag was found on the name's record: an earlier attempt stored it,
    nothing was sent now (size, digest and chunks are the stored object's)."""


async def upload_many(
    connection: ConnectionOptions,
    store_name: str,
    items: Iterable[UploadItem],
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    concurrency: int = 4,
    allowed_root: str | None = None,
    encryption: Keyring | None = None,
) -> list[UploadOutcome]:
    """Upload every item into the store, ``concurrency`` at a time; never raises for one
    object's failure (its outcome carries the error). A missing store is such a failure for
    every item (``StoreNotFoundError`` in each outcome). Repeated names are refused before
    anything is sent: concurrent uploads of one name would leave an arbitrary winner.

    An item's ``path`` is read with this process's rights: any file it can read. With
    ``allowed_root`` (an absolute directory) a path that resolves, after symlinks, outside it
    or to something other than a regular file fails that item (``PathNotAllowedError`` in its
    outcome) and nothing of it is read. A file that changes while it is read fails its item
    (``SourceChangedError``, nothing of it stored). With ``encryption`` (a
    :class:`jetstream.Keyring`) every object is encrypted chunk by chunk, as :func:`open_store`
    does.

    Raises:
        ClientValidationError: ``concurrency`` below 1, ``chunk_size`` not 1..8 MiB,
            ``allowed_root`` not absolute, ``encryption`` not a Keyring (WrongTypeError, one,
            for a ``concurrency`` or ``chunk_size`` that is not an int).
        DuplicateObjectNameError: a name appears more than once (nothing is uploaded).
        ConnectionFailedError: the server cannot be reached.
    """
    concurrency = check_count(concurrency, "concurrency", 1)
    chunk_size = check_chunk_size(chunk_size)
    cipher_for(encryption, False)  # bad options: before anything is sent
    root = None if allowed_root is None else check_root(allowed_root)
    items = list(items)
    _refuse_duplicates(items)
    async with connection.session() as js:
        try:
            store = await open_core(js, store_name, encryption=encryption)
        except StoreNotFoundError as exc:
            error = f"{type(exc).__name__}: {exc}"
            return [UploadOutcome(item.name, error=error) for item in items]
        return await upload_into(store, items, chunk_size, concurrency, root)


async def upload_into(
    store: StoreCore,
    items: Sequence[UploadItem],
    chunk_size: int,
    concurrency: int,
    root: str | None,
) -> list[UploadOutcome]:
    """:func:`upload_many`'s uploads, on a bound store, with checked options and names."""
    limit = asyncio.Semaphore(concurrency)

    async def one(item: UploadItem) -> UploadOutcome:
        async with limit:
            return await _upload(store, item, chunk_size, root)

    return list(await asyncio.gather(*(one(item) for item in items)))


def _refuse_duplicates(items: list[UploadItem]) -> None:
    counts = collections.Counter(item.name for item in items)
    repeated = [name for name, count in counts.items() if count > 1]
    if repeated:
        names = tuple(sorted(repeated))
        raise DuplicateObjectNameError(
            f"object names repeated in one upload: {', '.join(map(repr, names))}; "
            "each name must appear once (nothing was uploaded)",
            names,
        )


async def _upload(
    store: StoreCore, item: UploadItem, chunk_size: int, root: str | None
) -> UploadOutcome:
    if (item.path is None) == (item.data is None):
        return UploadOutcome(item.name, error="give exactly one of a path or data")
    try:
        if item.path is not None and root is not None:
            with open_under_root(item.path, root) as file:
                info = await _put(store, item, file, chunk_size)
        else:
            source = item.path if item.path is not None else item.data
            assert source is not None
            info = await _put(store, item, source, chunk_size)
    except StoredAlready as found:
        info = found.info
        return UploadOutcome(item.name, info.size, info.digest, info.chunks, found=True)
    except (JetStreamError, OSError, TypeError, ValueError) as exc:
        return UploadOutcome(item.name, error=f"{type(exc).__name__}: {exc}")
    return UploadOutcome(item.name, size=info.size, digest=info.digest, chunks=info.chunks)


async def _put(store: StoreCore, item: UploadItem, source: Source, chunk_size: int) -> ObjectInfo:
    return await put_object(store, item.name, source, chunk_size=chunk_size, once=item.once)
