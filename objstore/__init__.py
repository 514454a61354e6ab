"""objstore: NATS object stores whose uploads use fast-ingest batches (ADR-50).

Stores use the NATS object store layout (stream ``OBJ_<store>``, chunks ``$O.<store>.C.<nuid>``,
meta ``$O.<store>.M.<base64url(name)>``), so nats.go, nats-py and the ``nats`` CLI read them::

    store = await objstore.create_store(js, "artifacts")
    info = await store.put("model.bin", "path/to/model.bin", ttl="30d")
    async with store.open("model.bin") as reader:
        async for chunk in reader: ...
"""

from jetstream._public import show_as as _show_as

from ._errors import (
    DigestMismatchError,
    DuplicateObjectNameError,
    InvalidObjectMetaError,
    InvalidObjectNameError,
    ObjectChangedError,
    ObjectExistsError,
    ObjectLinkError,
    ObjectNotFoundError,
    PathNotAllowedError,
    SourceChangedError,
    SourceNotFoundError,
    StoreExistsError,
    StoreNotFoundError,
    UnreadableSourceError,
    UploadFailedError,
)
from ._files import local_path
from ._links import MAX_LINK_DEPTH
from ._manage import (
    StoreOptions,
    create_store,
    delete_store,
    list_stores,
    open_store,
    update_store,
)
from ._models import (
    DEFAULT_CHUNK_SIZE,
    ObjectInfo,
    ObjectLink,
    ObjectMetaOptions,
    StoreConfig,
    StoreStatus,
)
from ._permissions import reader_permissions, uploader_permissions
from ._scan import DirectoryScan, ScannedFile, SkippedEntry, scan_directory
from ._store import ObjectReader, ObjectStore

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "MAX_LINK_DEPTH",
    "DigestMismatchError",
    "DirectoryScan",
    "DuplicateObjectNameError",
    "InvalidObjectMetaError",
    "InvalidObjectNameError",
    "ObjectChangedError",
    "ObjectExistsError",
    "ObjectInfo",
    "ObjectLink",
    "ObjectLinkError",
    "ObjectMetaOptions",
    "ObjectNotFoundError",
    "ObjectReader",
    "ObjectStore",
    "PathNotAllowedError",
    "ScannedFile",
    "SkippedEntry",
    "SourceChangedError",
    "SourceNotFoundError",
    "StoreConfig",
    "StoreExistsError",
    "StoreNotFoundError",
    "StoreOptions",
    "StoreStatus",
    "UnreadableSourceError",
    "UploadFailedError",
    "create_store",
    "delete_store",
    "list_stores",
    "local_path",
    "open_store",
    "reader_permissions",
    "scan_directory",
    "update_store",
    "uploader_permissions",
]

_show_as(
    __name__,
    DirectoryScan,
    ObjectInfo,
    ObjectReader,
    ObjectStore,
    ScannedFile,
    SkippedEntry,
    StoreConfig,
    StoreStatus,
)
