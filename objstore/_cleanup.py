"""``ObjectStore.cleanup()``: chunks no meta record refers to (left by a crashed or killed
uploader) are purged; nothing is purged on the word of a record that cannot be read."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

from jetstream import StoredMessage
from jetstream._consume.scan import scan_stream

from ._core import StoreCore
from ._errors import InvalidObjectMetaError
from ._trust import info_from_message, is_literal_token

__all__ = ["remove_orphans"]

_log = logging.getLogger("objstore")


async def remove_orphans(core: StoreCore, older_than: timedelta) -> int:
    """Purge the chunks no meta record refers to whose newest chunk is older than
    ``older_than``; how many objects' chunks went (see :meth:`ObjectStore.cleanup`)."""
    referenced = await _referenced_nuids(core)
    if referenced is None:
        return 0
    now = datetime.now(UTC)
    orphans = []
    prefix = f"$O.{core.name}.C."
    async for message in scan_stream(core.js, core.stream, [f"{prefix}>"], headers_only=True):
        nuid = message.subject[len(prefix) :]
        if not is_literal_token(nuid):
            # A peer may store chunks on a literal `$O.<s>.C.>` (or `*`, or several
            # tokens): as a purge filter that subject would cover every object's chunks.
            _log.warning(
                "store %r: cleanup leaves the chunk on %r (not one literal token)",
                core.name,
                message.subject,
            )
        elif nuid not in referenced and now - message.time >= older_than:
            orphans.append(message.subject)
    for subject in orphans:
        await core.js.purge_stream(core.stream, subject=subject)
    return len(orphans)


async def _referenced_nuids(core: StoreCore) -> set[str] | None:
    """Every nuid a meta record keeps alive; None (and a warning) if a record is unreadable
    beyond telling its nuid: it might refer to any chunks, so none may be removed."""
    referenced: set[str] = set()
    unreadable: list[str] = []
    async for message in scan_stream(core.js, core.stream, [f"$O.{core.name}.M.>"]):
        nuid = _referenced_nuid(core.name, message)
        if nuid is None:
            unreadable.append(message.subject)
        else:
            referenced.add(nuid)
    if unreadable:
        _log.warning(
            "store %r: cleanup removes nothing while meta records are unreadable "
            "(they may refer to any chunks): %s",
            core.name,
            ", ".join(unreadable),
        )
        return None
    return referenced


def _referenced_nuid(store: str, message: StoredMessage) -> str | None:
    """The chunks a meta record keeps alive ("" for none); None when it cannot be told."""
    try:
        info = info_from_message(store, message.subject, message.data, message.headers)
    except InvalidObjectMetaError:
        try:  # not ADR-20 as a whole: a nuid alone still says which chunks to keep
            raw = json.loads(message.data)
        except (ValueError, RecursionError):  # not JSON, or nested beyond the recursion limit
            return None
        nuid = raw.get("nuid") if isinstance(raw, dict) else None
        if nuid == "" or (isinstance(nuid, str) and is_literal_token(nuid)):
            return nuid
        return None  # a nuid that is no literal token could mean any chunks
    return "" if info.deleted else info.nuid
