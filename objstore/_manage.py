"""Creating, opening, deleting and listing object stores."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator
from typing import Any

from jetstream import Feature, JetStream, Keyring, StreamExistsError
from jetstream._protocol.bucket_config import valid_bucket_names, validate_bucket_name

from ._encryption import cipher_for
from ._errors import StoreExistsError
from ._missing import missing_store
from ._models import StoreConfig, stream_config_for_store, stream_name
from ._store import ObjectStore, open_store, store_info

__all__ = ["create_store", "delete_store", "list_stores", "open_store", "store_info"]

_log = logging.getLogger("objstore")


async def create_store(
    js: JetStream,
    name: str,
    config: StoreConfig | None = None,
    *,
    encryption: Keyring | None = None,
    allow_plaintext: bool = False,
    **options: Any,
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
    return ObjectStore(
        js,
        name,
        marker_ttl=config.marker_ttl,
        encryption=encryption,
        allow_plaintext=allow_plaintext,
    )


async def delete_store(js: JetStream, name: str) -> None:
    """Delete a store and every object in it.

    Raises:
        StoreNotFoundError: no such store.
    """
    validate_bucket_name(name)
    async with missing_store(js, name):
        await js.delete_stream(stream_name(name))


async def list_stores(js: JetStream) -> AsyncIterator[str]:
    """Names of every object store of the account. A stream ``OBJ_<name>`` whose name is no
    valid store name (anyone may create one) is skipped with a warning in the log.

    Raises:
        JetStreamError: the listing failed.
    """
    async for name in valid_bucket_names(js.stream_names(subject="$O.*.M.>"), "OBJ_", _log):
        yield name
