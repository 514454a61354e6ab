"""Rewrites of an object's meta record, each conditional on the record it was computed from
(see :mod:`objstore._meta`): ``delete``'s tombstone, ``update_meta`` in place and as a rename
(the copy first, then the source's tombstone, the copy withdrawn when the source changed in
between), and link records."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from nats.nuid import NUID

from jetstream import WrongLastSequenceError

from ._core import StoreCore
from ._errors import ObjectExistsError, ObjectNotFoundError
from ._finish import CallerGone, stop_if_gone
from ._meta import MetaRecord, attempts, read_record, write_record
from ._models import ObjectInfo, ObjectLink, ObjectMetaOptions, chunk_subject

__all__ = ["delete_object", "rename", "update_in_place", "write_link"]

_log = logging.getLogger("objstore")


async def delete_object(core: StoreCore, name: str, caller_gone: CallerGone) -> None:
    for attempt in attempts(f"delete of {name!r}"):
        record = await read_record(core, name, strict=False)
        if record is None or (record.readable and not record.live):
            raise ObjectNotFoundError(name)
        stop_if_gone(attempt, caller_gone, f"delete of {name!r}")
        try:
            await tombstone(core, record)
        except WrongLastSequenceError:
            continue  # replaced meanwhile: delete what is there now
        if not record.readable:
            # Nothing is purged on the word of a record that failed its checks (a nuid
            # of ">" would name every object's chunks); cleanup() finds its chunks.
            _log.warning("store %r: deleted the unreadable meta record of %r", core.name, name)
        elif not record.info.is_link and record.info.nuid:
            await core.js.purge_stream(
                core.stream, subject=chunk_subject(core.name, record.info.nuid)
            )
        return


async def live_record(core: StoreCore, name: str) -> MetaRecord:
    record = await read_record(core, name)
    if record is None or not record.live:
        raise ObjectNotFoundError(name)
    return record


async def tombstone(core: StoreCore, record: MetaRecord) -> int:
    """Replace ``record`` by a ``deleted`` one (same TTL left), if it is still the newest."""
    info = record.info
    tombstone = ObjectInfo(
        name=info.name,
        bucket=core.name,
        nuid=info.nuid,
        size=0,
        mtime=datetime.now(UTC),
        chunks=0,
        deleted=True,
    )
    return await write_record(
        core, tombstone, record.ttl_headers, expected=record.seq, msg_id=_msg_id()
    )


async def update_in_place(
    core: StoreCore, name: str, change: Callable[[ObjectInfo], ObjectInfo]
) -> ObjectInfo:
    for _ in attempts(f"update of {name!r}"):
        record = await live_record(core, name)
        updated = change(record.info)
        try:
            await write_record(
                core, updated, record.ttl_headers, expected=record.seq, msg_id=_msg_id()
            )
        except WrongLastSequenceError:
            continue
        return updated
    raise AssertionError("unreachable")  # pragma: no cover


async def rename(
    core: StoreCore,
    name: str,
    target: str,
    change: Callable[[ObjectInfo], ObjectInfo],
    caller_gone: CallerGone,
) -> ObjectInfo:
    for attempt in attempts(f"rename of {name!r} to {target!r}"):
        source = await live_record(core, name)
        taken = await read_record(core, target)
        if taken is not None and not taken.info.deleted:
            raise ObjectExistsError(f"an object named {target!r} exists")
        stop_if_gone(attempt, caller_gone, f"rename of {name!r} to {target!r}")
        renamed = change(source.info)
        try:  # the copy first: a crash after it leaves two names, not none
            copy_seq = await write_record(
                core,
                renamed,
                source.ttl_headers,
                expected=taken.seq if taken is not None else 0,
                msg_id=_msg_id(),
            )
        except WrongLastSequenceError:
            continue  # target written meanwhile: check again whether it is free
        try:
            await tombstone(core, source)
        except WrongLastSequenceError:
            # The source changed after the copy (a put may have purged the copied chunks):
            # withdraw the copy and start over.
            copy = MetaRecord(info=renamed, seq=copy_seq, ttl_headers=source.ttl_headers)
            await withdraw(core, copy)
            continue
        return renamed
    raise AssertionError("unreachable")  # pragma: no cover


async def withdraw(core: StoreCore, copy: MetaRecord) -> None:
    """Tombstone a rename's copy, also after someone updated it meanwhile (an
    ``update_meta`` of the new name): as long as the name still holds the copied chunks it
    is the copy, and left alone it would share them with the source, whose next put
    purges them. A name replaced by a put (other chunks) or deleted is left as it is."""
    nuid = copy.info.nuid
    for _ in attempts(f"withdrawal of the copy {copy.info.name!r}"):
        try:
            await tombstone(core, copy)
            return
        except WrongLastSequenceError:
            current = await read_record(core, copy.info.name, strict=False)
            if current is None or not current.live or current.info.nuid != nuid:
                return
            copy = current


async def write_link(core: StoreCore, name: str, link: ObjectLink) -> ObjectInfo:
    for _ in attempts(f"link {name!r}"):
        existing = await read_record(core, name)
        if existing is not None and existing.live and not existing.info.is_link:
            raise ObjectExistsError(f"{name!r} is an object, not a link")
        info = ObjectInfo(
            name=name,
            bucket=core.name,
            nuid=_msg_id(),
            size=0,
            mtime=datetime.now(UTC),
            chunks=0,
            options=ObjectMetaOptions(link=link),
        )
        expected = existing.seq if existing is not None else 0
        try:  # a link is a record of its own: no TTL carried over
            await write_record(core, info, {}, expected=expected, msg_id=_msg_id())
        except WrongLastSequenceError:
            continue
        return info
    raise AssertionError("unreachable")  # pragma: no cover


def _msg_id() -> str:
    return NUID().next().decode()
