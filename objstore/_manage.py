"""Creating, opening, updating, deleting and listing object stores."""

from __future__ import annotations

import dataclasses
import logging
from typing import Literal, TypedDict, Unpack

import msgspec

from jetstream import AsyncListing, DurationValue, Feature, JetStream, Keyring, StreamExistsError
from jetstream._protocol.bucket_config import valid_bucket_names, validate_bucket_name

from ._core import store_info
from ._encryption import cipher_for
from ._errors import StoreExistsError, missing_store
from ._models import StoreConfig, store_config_from_stream, stream_config_for_store, stream_name
from ._store import ObjectStore, bound_store, open_store

__all__ = [
    "StoreOptions",
    "create_store",
    "delete_store",
    "list_stores",
    "open_store",
    "store_info",
    "update_store",
]

_log = logging.getLogger("objstore")


class StoreOptions(TypedDict, total=False):
    """Keyword options of :func:`create_store` / :func:`update_store`: the fields of
    :class:`StoreConfig`."""

    description: str
    max_age: DurationValue | None
    marker_ttl: DurationValue | None
    max_bytes: int
    storage: Literal["file", "memory"]
    replicas: int
    compression: bool
    metadata: dict[str, str]


async def create_store(
    js: JetStream,
    name: str,
    config: StoreConfig | None = None,
    *,
    encryption: Keyring | None = None,
    allow_plaintext: bool = False,
    **options: Unpack[StoreOptions],
) -> ObjectStore:
    """Create an object store (``OBJ_<name>``) with fast ingest (server 2.14+) and per-object
    TTL; give a :class:`StoreConfig` or its fields as keywords. Creating the same store again
    returns it. Expiry markers (``marker_ttl``) are off unless asked for: other NATS clients
    cannot read them (see :attr:`StoreConfig.marker_ttl`). ``encryption`` and
    ``allow_plaintext`` as in :func:`open_store`.

    Raises:
        InvalidBucketNameError, InvalidBucketConfigError: bad input; nothing is sent.
        ClientValidationError: ``encryption`` is not a Keyring, or ``allow_plaintext``
            without it; nothing is sent.
        UnsupportedServerFeatureError: the server lacks fast ingest (API level < 4).
        StoreExistsError: a store of that name exists with another configuration.
    """
    validate_bucket_name(name)
    cipher_for(encryption, allow_plaintext)
    config = _merge(config or StoreConfig(), options)
    await js.require(Feature.FAST_INGEST)
    try:
        await js.add_stream(stream_config_for_store(name, config, allow_batched=True))
    except StreamExistsError as exc:
        raise StoreExistsError(
            f"object store {name!r} exists with another configuration",
            code=exc.code,
            err_code=exc.err_code,
        ) from exc
    return ObjectStore(
        js,
        name,
        marker_ttl=config.marker_ttl,
        encryption=encryption,
        allow_plaintext=allow_plaintext,
    )


async def update_store(
    js: JetStream,
    name: str,
    config: StoreConfig | None = None,
    **options: Unpack[StoreOptions],
) -> ObjectStore:
    """Change a store's configuration (its objects stay); fields not given keep their current
    value. Give a :class:`StoreConfig` or its fields as keywords (``max_bytes=``,
    ``description=``, ``max_age=``, ``replicas=``, ``compression=``, ``marker_ttl=``,
    ``metadata=``). Settings we do not model (placement, sources, fast ingest, direct get)
    are preserved; the server refuses what it cannot change (the storage type). Returns a
    handle without encryption (open the store again with ``encryption=`` for one).

    Raises:
        InvalidBucketNameError, InvalidBucketConfigError: bad input; nothing is sent.
        StoreNotFoundError: no such store (also deleted meanwhile).
        InvalidStreamConfigError: the server refused the change (e.g. the storage type, or
            ``marker_ttl`` on a store made without per-message TTL).
    """
    current = await store_info(js, name)
    merged = _merge(config or store_config_from_stream(current.config), options)
    ours = stream_config_for_store(name, merged, allow_batched=current.config.allow_batched)
    changed = {field: getattr(ours, field) for field in _STORE_STREAM_FIELDS}
    # The server's own metadata (_nats.*) is its to keep; ours replaces the rest.
    server_keys = {
        k: v for k, v in (current.config.metadata or {}).items() if k.startswith("_nats.")
    }
    changed["metadata"] = {**server_keys, **(ours.metadata or {})} or None
    updated = msgspec.structs.replace(current.config, **changed)
    async with missing_store(js, name):  # deleted since it was read
        info = await js.update_stream(updated)
    return bound_store(js, name, info)


_STORE_STREAM_FIELDS = (
    "description",
    "max_age",
    "max_bytes",
    "storage",
    "num_replicas",
    "compression",
    "subject_delete_marker_ttl",
)


async def delete_store(js: JetStream, name: str) -> None:
    """Delete a store and every object in it.

    Raises:
        StoreNotFoundError: no such store.
    """
    validate_bucket_name(name)
    async with missing_store(js, name):
        await js.delete_stream(stream_name(name))


def list_stores(js: JetStream) -> AsyncListing[str]:
    """The names of every object store of the account: ``async for`` or ``await`` (a list).
    A stream ``OBJ_<name>`` whose name is no valid store name (anyone may create one) is
    skipped with a warning in the log.

    Raises:
        JetStreamError: (iterating) the listing failed.
    """
    names = js.stream_names(subject="$O.*.M.>")
    return AsyncListing(valid_bucket_names(names, "OBJ_", _log))


def _merge(config: StoreConfig, options: StoreOptions) -> StoreConfig:
    return dataclasses.replace(config, **options) if options else config  # type: ignore[arg-type]
