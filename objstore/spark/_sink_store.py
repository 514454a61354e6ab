"""Storing a streaming write's objects exactly once (no Spark here: a task calls it): every
row checked before the first upload, then each object uploaded with the task's
:class:`~objstore._once.WriteTag`, so an object an earlier or racing attempt of the task
stored is found and not stored again (see ``objstore._once`` for why this holds)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

from jetstream import ClientValidationError

from .._checks import validate_object_name
from .._core import StoreCore
from .._errors import DuplicateObjectNameError, UnreadableSourceError, UploadFailedError
from .._many import UploadItem, UploadOutcome, upload_into
from .._meta import check_record_fits, read_record
from .._models import ObjectInfo, ObjectMetaOptions
from .._once import WRITE_HEADER, WriteTag
from .._paths import open_under_root

__all__ = ["Limits", "Report", "Row", "store_objects"]

_log = logging.getLogger("objstore.spark")

Row = tuple[Any, Any, Any]
"""One input row as the DataFrame holds it: name, data, path."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """How a task uploads: chunk size, uploads at a time, the ``allowedRoot`` of paths (None:
    any file the executor can read), and whether bad rows are skipped instead of failing."""

    chunk_size: int
    concurrency: int
    root: str | None = None
    skip_bad: bool = False


@dataclasses.dataclass
class Report:
    """What one task did with its rows."""

    rows: int = 0
    stored: int = 0
    """Objects this attempt stored."""
    found: int = 0
    """Objects found stored by an earlier (or racing) attempt: not stored again."""
    bad: int = 0
    """Bad rows left out (``onBadRow=skip``)."""
    bytes: int = 0
    """Bytes this attempt stored (as stored: encrypted objects count their ciphertext)."""

    def stored_note(self, batch: int) -> str:
        """What stays stored of micro-batch ``batch`` when this task fails."""
        found = (
            f" ({self.found} more were found stored by an earlier attempt)" if self.found else ""
        )
        return (
            f"natsobj: this task stored {self.stored} objects of micro-batch {batch}{found} "
            "before it failed; they stay stored, each whole, and a replay of the micro-batch "
            "does not store them again"
        )


async def store_objects(
    store: StoreCore, rows: Sequence[Row], tag: WriteTag, limits: Limits, batch: int
) -> Report:
    """Store each row's object once (``tag``: this task of micro-batch ``batch``). Every row
    is checked before the first upload; a row whose file is gone but whose object this task
    stored in an earlier attempt counts as found.

    Raises:
        InvalidObjectNameError, ValueTooLargeError, DuplicateObjectNameError,
            SourceNotFoundError, UnreadableSourceError, PathNotAllowedError,
            ClientValidationError: a bad row (without ``skip_bad``), before anything is
            stored; the error's note names its position.
        UploadFailedError: uploads failed (the others stay stored; the error says which and
            how many); a StoreNotFoundError among them when the store is gone.
    """
    report = Report(rows=len(rows))
    items: list[UploadItem] = []
    seen: set[str] = set()
    for index, row in enumerate(rows):
        try:
            item = await _checked(store, row, tag, limits.root, seen)
        except ClientValidationError as exc:
            _bad_row(exc, index, batch, limits.skip_bad)
            report.bad += 1
            continue
        if item is None:
            report.found += 1
        else:
            items.append(item)
        seen.add(row[0])
    outcomes = await upload_into(store, items, limits.chunk_size, limits.concurrency, limits.root)
    for outcome in outcomes:
        if outcome.error is None:
            report.found += outcome.found
            report.stored += not outcome.found
            report.bytes += 0 if outcome.found else outcome.size or 0
    _raise_failures(outcomes, report, batch)
    return report


async def _checked(
    store: StoreCore, row: Row, tag: WriteTag, root: str | None, seen: set[str]
) -> UploadItem | None:
    """The row as an upload, or None when its file is gone and its object was stored by an
    earlier attempt.

    Raises:
        ClientValidationError (and its subclasses above): the row is bad.
    """
    name, data, path = row
    validate_object_name(name)
    if (data is None) == (path is None):
        raise ClientValidationError(
            f"object {name[:80]!r}: a row gives exactly one of data or path, "
            f"not {'both' if data is not None else 'neither'}"
        )
    if name in seen:
        raise DuplicateObjectNameError(
            f"object {name[:80]!r} is named by two rows of this task's share of the "
            "micro-batch; a micro-batch stores each name once",
            (name,),
        )
    draft = ObjectInfo(
        name=name,
        bucket=store.name,
        nuid="N" * 22,
        size=0,
        mtime=None,
        chunks=0,
        headers={WRITE_HEADER: [tag.text], **_cipher_headers(store)},
        options=ObjectMetaOptions(max_chunk_size=2**31),
    )
    check_record_fits(store, draft, {})  # the name (validated first), its subject, the record
    item = UploadItem(name=name, data=data, path=path, once=tag)
    if path is not None:
        try:
            with open_under_root(path, root or "/"):  # a regular file, readable, under root
                pass
        except UnreadableSourceError:
            record = await read_record(store, name, strict=False)
            if record is not None and record.readable and tag.holds(record.info):
                return None
            raise
    return item


def _cipher_headers(store: StoreCore) -> dict[str, list[str]]:
    return {} if store.cipher is None else store.cipher.meta_headers()


def _bad_row(exc: ClientValidationError, index: int, batch: int, skip: bool) -> None:
    if not skip:
        exc.add_note(
            f"natsobj: row {index} of this task's share of micro-batch {batch} is bad, so "
            "none of its objects was stored (onBadRow=skip leaves bad rows out)"
        )
        raise exc
    _log.warning(
        "natsobj: row %d of micro-batch %d left out (onBadRow=skip): %s: %s",
        index,
        batch,
        type(exc).__name__,
        exc,
    )


def _raise_failures(outcomes: list[UploadOutcome], report: Report, batch: int) -> None:
    failed = [o for o in outcomes if o.error is not None]
    if not failed:
        return
    first = failed[0]
    error = UploadFailedError(
        f"natsobj: {len(failed)} of this task's {len(outcomes)} uploads of micro-batch {batch} "
        f"failed; the first, {first.name[:80]!r}: {first.error}"
    )
    error.add_note(report.stored_note(batch))
    raise error
