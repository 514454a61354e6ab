"""Creating, opening, deleting and listing object stores."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from jetstream import (
    Feature,
    JetStream,
    JetStreamError,
    StoreExistsError,
    StoreNotFoundError,
    StreamExistsError,
    StreamInfo,
    StreamNotFoundError,
)
from kvstore import validate_bucket_name

from ._models import StoreConfig, store_config_from_stream, stream_config_for_store, stream_name
from ._store import ObjectStore

__all__ = ["create_store", "delete_store", "list_stores", "open_store", "store_info"]


async def create_store(
    js: JetStream, name: str, config: StoreConfig | None = None, **options: Any
) -> ObjectStore:
    """Create an object store (``OBJ_<name>``) with fast ingest (server 2.14+) and per-object
    TTL; give a :class:`StoreConfig` or its fields as keywords. Creating the same store again
    returns it.

    Raises:
        InvalidBucketNameError, InvalidBucketConfigError: bad input; nothing is sent.
        UnsupportedServerFeatureError: the server lacks fast ingest (API level < 4).
        StoreExistsError: a store of that name exists with another configuration.
    """
    validate_bucket_name(name)
    config = (
        dataclasses.replace(config or StoreConfig(), **options)
        if options
        else (config or StoreConfig())
    )
    await js.require(Feature.FAST_INGEST)
    try:
        await js.add_stream(stream_config_for_store(name, config, allow_batched=True))
    except StreamExistsError as exc:
        raise StoreExistsError(
            f"object store {name!r} exists with another configuration",
            code=exc.code,
            err_code=exc.err_code,
        ) from exc
    return ObjectStore(js, name, marker_ttl=config.marker_ttl)


async def open_store(js: JetStream, name: str) -> ObjectStore:
    """Bind to an existing object store (made by any NATS client). Stores made by other clients
    lack fast ingest: uploads to them need ``allow_batched``, which :func:`create_store` sets.

    Raises:
        StoreNotFoundError: no such store.
    """
    info = await store_info(js, name)
    marker_ttl = store_config_from_stream(info.config).marker_ttl
    return ObjectStore(js, name, direct=info.config.allow_direct, marker_ttl=marker_ttl)


async def delete_store(js: JetStream, name: str) -> None:
    """Delete a store and every object in it.

    Raises:
        StoreNotFoundError: no such store.
    """
    validate_bucket_name(name)
    try:
        await js.delete_stream(stream_name(name))
    except StreamNotFoundError as exc:
        raise StoreNotFoundError(f"object store {name!r} not found", code=exc.code) from exc


async def list_stores(js: JetStream) -> AsyncIterator[str]:
    """Names of every object store of the account."""
    async for stream in js.stream_names(subject="$O.*.M.>"):
        if stream.startswith("OBJ_"):
            yield stream[4:]


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
