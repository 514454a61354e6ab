"""Header names the library sends or reads, each documented once (public: ``jetstream.headers``).

Values are the exact wire spellings used by nats-server 2.15 (see shared protocol notes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from ._errors import InvalidHeaderError

__all__ = [
    "BATCH_COMMIT",
    "BATCH_ID",
    "BATCH_SEQUENCE",
    "ENCRYPTION",
    "EXPECTED_LAST_MSG_ID",
    "EXPECTED_LAST_SEQUENCE",
    "EXPECTED_LAST_SUBJECT_SEQUENCE",
    "EXPECTED_STREAM",
    "KV_OPERATION",
    "KV_OPERATION_DELETE",
    "KV_OPERATION_PURGE",
    "LAST_SEQUENCE",
    "MARKER_REASON",
    "MSG_ID",
    "MSG_SIZE",
    "NUM_PENDING",
    "PENDING_BYTES",
    "PENDING_MESSAGES",
    "PIN_ID",
    "ROLLUP",
    "ROLLUP_SUBJECT",
    "SEQUENCE",
    "STATUS",
    "STREAM",
    "SUBJECT",
    "TIME_STAMP",
    "TTL",
    "UPTO_SEQUENCE",
    "validate_headers",
]

TTL: Final = "Nats-TTL"
"""Per-message TTL (ADR-43): ``never``, whole seconds, or a Go duration of at least 1 s."""

MARKER_REASON: Final = "Nats-Marker-Reason"
"""Set by the server on subject delete markers; 2.15 only ever sends ``MaxAge``."""

ROLLUP: Final = "Nats-Rollup"
"""``sub`` replaces every earlier message of the subject; ``all`` the whole stream."""
ROLLUP_SUBJECT: Final = "sub"

MSG_ID: Final = "Nats-Msg-Id"
"""De-duplication id, remembered for the stream's duplicate window."""

EXPECTED_STREAM: Final = "Nats-Expected-Stream"
EXPECTED_LAST_SEQUENCE: Final = "Nats-Expected-Last-Sequence"
EXPECTED_LAST_SUBJECT_SEQUENCE: Final = "Nats-Expected-Last-Subject-Sequence"
"""CAS on one subject: write only if the subject's last sequence equals this (0 = none)."""

EXPECTED_LAST_MSG_ID: Final = "Nats-Expected-Last-Msg-Id"
"""Refused inside atomic batches (10177)."""

BATCH_ID: Final = "Nats-Batch-Id"
"""Atomic batch id (ADR-50), at most 64 characters; stored messages keep it."""
BATCH_SEQUENCE: Final = "Nats-Batch-Sequence"
"""1-based position in the atomic batch; a gap abandons the batch."""
BATCH_COMMIT: Final = "Nats-Batch-Commit"
"""``1``: store this message and commit; ``eob``: commit without storing this one."""

KV_OPERATION: Final = "KV-Operation"
"""KV tombstones: ``DEL`` keeps history, ``PURGE`` (with a ``sub`` rollup) drops it."""
KV_OPERATION_DELETE: Final = "DEL"
KV_OPERATION_PURGE: Final = "PURGE"

# Added by the server to direct-get replies, after the stored headers.
STREAM: Final = "Nats-Stream"
SUBJECT: Final = "Nats-Subject"
SEQUENCE: Final = "Nats-Sequence"
TIME_STAMP: Final = "Nats-Time-Stamp"
NUM_PENDING: Final = "Nats-Num-Pending"
LAST_SEQUENCE: Final = "Nats-Last-Sequence"
UPTO_SEQUENCE: Final = "Nats-UpTo-Sequence"
PENDING_MESSAGES: Final = "Nats-Pending-Messages"
"""On 408/409 pull statuses: messages the ended pull did not deliver."""
PENDING_BYTES: Final = "Nats-Pending-Bytes"
"""On 408/409 pull statuses: bytes of the ended pull's budget left unused."""
PIN_ID: Final = "Nats-Pin-Id"
"""On messages of a ``pinned_client`` priority group: the pin the pulls must carry as ``id``."""
MSG_SIZE: Final = "Nats-Msg-Size"
"""Payload length, sent instead of the payload by ``headers_only`` consumers."""

ENCRYPTION: Final = "Jetstore-Enc"
"""On client-side encrypted values (``Keyring``): ``v1;<key id>``, the envelope format version
and the key that sealed the payload. Not a ``Nats-``/``KV-`` name (the server and the KV
clients give those meaning). nats.go's ``readMIMEHeader`` keeps a header name's case, and
this one is also already in canonical MIME form, so code looking it up either way finds it;
peers store and copy it unchanged."""

STATUS: Final = "Status"
"""Where nats-py puts the status code of a ``NATS/1.0 <code>`` header line (a str)."""


# A header name is an HTTP-style token: whitespace, ':' or a control character (NUL, CR, LF)
# would end it early or split the header block.
_BAD_NAME = re.compile(r"[\x00-\x20\x7f:]")


def validate_headers(headers: Mapping[str, str]) -> None:
    """Check that user headers can be written on the wire unchanged.

    Raises:
        InvalidHeaderError: an empty name, a name with whitespace, ``:`` or a control
            character, or a value containing CR or LF (which would split the header block).
    """
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise InvalidHeaderError(f"header names and values must be str: {name!r}: {value!r}")
        if not name or _BAD_NAME.search(name):
            raise InvalidHeaderError(f"invalid header name: {name!r}")
        if "\r" in value or "\n" in value:
            raise InvalidHeaderError(f"header {name!r} has a CR or LF in its value")
