"""What a stored meta record must satisfy before any of its fields is used.

Anyone allowed to publish on ``$O.<store>.M.>`` writes the records every client reads. Their
nuid becomes a subject (a reader's filter, ``delete``'s purge), their counts bound a read,
their link names a store to open. So a record is checked once, where it is decoded, for
everything an ADR-20 writer (nats.go, nats.js, nats-py, ours) always satisfies and a hostile
one might not; a record failing a check is :class:`InvalidObjectMetaError` like one that is
not JSON (refused on direct access, skipped with a warning by listings, never purged on).
"""

from __future__ import annotations

import re

from jetstream import InvalidBucketNameError
from jetstream import headers as hdr
from jetstream._protocol.bucket_config import validate_bucket_name

from ._errors import InvalidObjectMetaError
from ._models import ObjectInfo, decode_info, name_from_meta_subject

__all__ = ["check_readable", "check_record", "info_from_message", "is_literal_token"]

_LITERAL_TOKEN = re.compile(r"[!-~]+")
"""Printable ASCII without space: no whitespace or control character can split a subject."""


def is_literal_token(token: str) -> bool:
    """One literal subject token: non-empty, no ``.``, no wildcard character, no whitespace or
    control character (stricter than the server, which would take ``a*`` as a literal: no
    client's nuid has one, and a subject built from it must match exactly itself)."""
    return bool(_LITERAL_TOKEN.fullmatch(token)) and not any(c in token for c in ".*>")


def check_record(info: ObjectInfo, *, store: str, subject_name: str) -> None:
    """Check a decoded record of ``store`` found on the meta subject of ``subject_name``.

    Raises:
        InvalidObjectMetaError: a field no ADR-20 writer produces (the message says which).
    """
    problem = _problem(info, store=store, subject_name=subject_name)
    if problem:
        raise InvalidObjectMetaError(
            f"meta record of {subject_name!r} in store {store!r}: {problem}"
        )


def check_readable(info: ObjectInfo) -> None:
    """Check what a read of ``info`` (from anywhere, e.g. built by a caller) puts into a
    subject or a bound: its nuid and counts.

    Raises:
        InvalidObjectMetaError: the nuid is not one literal token, or the counts are off.
    """
    problem = _nuid_problem(info) or _counts_problem(info)
    if problem:
        raise InvalidObjectMetaError(f"object {info.name!r} cannot be read: {problem}")


def _nuid_problem(info: ObjectInfo) -> str:
    if info.nuid and not is_literal_token(info.nuid):
        return f"nuid {info.nuid!r} is not a single literal subject token"
    return ""


def _problem(info: ObjectInfo, *, store: str, subject_name: str) -> str:
    # A record is about the object its subject names, in the store whose stream holds it:
    # one claiming another would have rewrites and reads aimed at that one.
    if info.bucket != store:
        return f"names store {info.bucket!r}"
    if info.name != subject_name:
        return f"names object {info.name!r}, its subject {subject_name!r}"
    return _nuid_problem(info) or _counts_problem(info) or _link_problem(info)


def _counts_problem(info: ObjectInfo) -> str:
    size, chunks = info.size, info.chunks
    chunk_size = info.options.max_chunk_size if info.options else 0
    if size < 0 or chunks < 0 or chunk_size < 0:
        return f"negative size {size}, chunks {chunks} or max_chunk_size {chunk_size}"
    if (size == 0) != (chunks == 0):
        return f"size {size} with chunks {chunks} (both are zero or neither)"
    if chunks > size:
        return f"chunks {chunks} exceed size {size} (no chunk is empty)"
    if chunks and not info.nuid:
        return f"chunks {chunks} without a nuid"
    return ""


def _link_problem(info: ObjectInfo) -> str:
    link = info.link
    if link is None:
        return ""
    try:
        validate_bucket_name(link.bucket)
    except InvalidBucketNameError:
        return f"links to an invalid store name {link.bucket!r}"
    return ""


def info_from_message(store: str, subject: str, data: bytes, headers: dict[str, str]) -> ObjectInfo:
    """The ObjectInfo of a stored meta message, checked (any peer may have written it); an
    empty payload (a server expiry marker, or a purge marker) reads as a deleted object.

    Raises:
        InvalidObjectMetaError: the payload is not an ADR-20 meta record, or one whose fields
            cannot be trusted (see :func:`objstore._trust.check_record`).
    """
    name = name_from_meta_subject(subject)
    if data:
        info = decode_info(data, name=name, bucket=store)
        check_record(info, store=store, subject_name=name)
        return info
    return ObjectInfo(
        name=name,
        bucket=store,
        nuid="",
        size=0,
        mtime=None,
        chunks=0,
        deleted=True,
        expired=hdr.MARKER_REASON in headers,
    )
