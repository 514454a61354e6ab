"""StoreCore: what every part of an object store handle works on (its stream, cipher, upload
mode and the reads of meta records), shared by :class:`ObjectStore` and the helpers that serve
it (uploads, downloads, meta records, rekey, cleanup), so none of them reaches into the
facade."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator
from datetime import timedelta

from jetstream import JetStream, Keyring, MessageNotFoundError, StreamInfo, TTLValue
from jetstream._consume.scan import scan_stream
from jetstream._protocol.bucket_config import validate_bucket_name
from jetstream._protocol.limits import payload_room
from jetstream._protocol.ttl import parse_ttl_at_least

from ._encryption import OVERHEAD, cipher_for
from ._errors import InvalidObjectMetaError, StoreNotFoundError, missing_store
from ._models import ObjectInfo, meta_subject, store_config_from_stream, stream_name
from ._trust import info_from_message

__all__ = ["StoreCore", "open_core", "store_info"]

_log = logging.getLogger("objstore")


class StoreCore:
    """One object store as this handle binds it: the names, options and reads of meta records
    that :class:`ObjectStore` and its helpers share. Every request runs in :attr:`missing`, so
    a store deleted by anyone is :class:`StoreNotFoundError` naming it."""

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
        self.cipher = cipher_for(encryption, allow_plaintext)
        self.js = js
        self.name = name
        self.stream = stream_name(name)
        self.direct = direct
        self.marker_ttl = marker_ttl
        self.batched = batched  # the stream's allow_batched; None until checked
        self._fallback_logged = False
        # Every operation that reaches the server runs in it: a store deleted by anyone is
        # StoreNotFoundError naming it, whatever the server answered (10059, or a 503).
        self.missing = missing_store(js, name)

    def chunk_room(self, ttl_headers: dict[str, str]) -> int:
        """The largest (plaintext) chunk that fits the server's max_payload when stored."""
        if self.cipher is None:
            return payload_room(self.js.nc, ttl_headers)
        sealed = {**ttl_headers, **self.cipher.chunk_headers()}
        return payload_room(self.js.nc, sealed) - OVERHEAD

    async def fast_ingest(self) -> bool:
        """Whether uploads may use fast ingest: the stream's ``allow_batched``, looked up once
        per store (stores made by other clients lack it: uploads then use acked publishes)."""
        if self.batched is None:
            self.batched = (await store_info(self.js, self.name)).config.allow_batched
        if not self.batched and not self._fallback_logged:
            self._fallback_logged = True
            _log.info(
                "object store %r has no allow_batched (made by another client): uploads use "
                "acked publishes in a bounded window instead of fast ingest",
                self.name,
            )
        return self.batched

    def checked_ttl(self, ttl: TTLValue) -> int:
        return parse_ttl_at_least(ttl, self.marker_ttl, owner=f"store {self.name!r}")

    async def current_info(self, name: str, *, include_deleted: bool = False) -> ObjectInfo | None:
        try:
            message = await self.js.get_last_message(
                self.stream, meta_subject(self.name, name), direct=None if self.direct else False
            )
        except MessageNotFoundError:
            return None
        info = info_from_message(self.name, message.subject, message.data, message.headers)
        if info.deleted and not include_deleted:
            return None
        return info

    def readable(self, subject: str, data: bytes, headers: dict[str, str]) -> ObjectInfo | None:
        """For listings: a record nobody can read is skipped with a warning, never fatal."""
        try:
            return info_from_message(self.name, subject, data, headers)
        except InvalidObjectMetaError as exc:
            _log.warning(
                "store %r: skipping the unreadable meta record on %s: %s", self.name, subject, exc
            )
            return None

    async def infos(self, *, include_deleted: bool) -> AsyncGenerator[ObjectInfo, None]:
        # Closed with this generator (a listing left early), not when collected: the
        # scan's consumer is deleted by the time the caller's ``aclose()`` returns.
        scan = scan_stream(self.js, self.stream, [f"$O.{self.name}.M.>"])
        async with contextlib.aclosing(scan) as messages:
            async for message in messages:
                info = self.readable(message.subject, message.data, message.headers)
                if info is not None and (include_deleted or not info.deleted):
                    yield info


async def store_info(js: JetStream, name: str) -> StreamInfo:
    """The stream info of a store.

    Raises:
        StoreNotFoundError: no such store, or a stream that is not an object store.
    """
    validate_bucket_name(name)
    async with missing_store(js, name):
        info = await js.stream_info(stream_name(name))
    if f"$O.{name}.M.>" not in info.config.subjects:
        raise StoreNotFoundError(name, f"stream {info.config.name!r} is not an object store")
    return info


async def open_core(js: JetStream, name: str, *, encryption: Keyring | None = None) -> StoreCore:
    """The core of an existing store, bound with the options its stream records (as
    :func:`objstore.open_store` binds a handle), for helpers that work on it directly.

    Raises:
        ClientValidationError: ``encryption`` is not a Keyring.
        StoreNotFoundError: no such store.
    """
    cipher_for(encryption, False)  # bad options: before anything is sent
    info = await store_info(js, name)
    return StoreCore(
        js,
        name,
        direct=info.config.allow_direct,
        marker_ttl=store_config_from_stream(info.config).marker_ttl,
        batched=info.config.allow_batched,
        encryption=encryption,
    )
