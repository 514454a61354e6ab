"""``Bucket.rekey()``: re-encrypt the live values sealed with an older key of the ring (or
plain values, while migrating) with the primary key, by compare-and-set, so a concurrent
writer is never overwritten. Idempotent: run again after an interruption, it continues with
what is left (values already under the primary are only counted).

No window where a value is unreadable: the old revision stays readable with its key (still in
the ring) until the new one, readable with the primary, replaces it.
"""

from __future__ import annotations

import asyncio
import logging
import math
from datetime import UTC, datetime

from nats.nuid import NUID

from jetstream import (
    NEVER,
    DecryptionError,
    InvalidTTLError,
    RekeyReport,
    StoredMessage,
    ValueTooLargeError,
    WrongLastSequenceError,
)
from jetstream import headers as hdr
from jetstream._consume.scan import scan_stream

from ._core import BucketCore
from ._encryption import EncryptionStage
from ._models import Op, op_from_headers

__all__ = ["rekey_bucket"]

_log = logging.getLogger("kvstore")
_CONCURRENCY = 64  # CAS writes in flight at once (each on its own key)


async def rekey_bucket(bucket: BucketCore, stage: EncryptionStage) -> RekeyReport:
    """Rewrite every live value not sealed with ``stage``'s primary key (see module docs)."""
    started_at = (await bucket.js.stream_info(bucket.stream)).state.last_seq
    report = RekeyReport()
    pending: list[StoredMessage] = []
    async for message in scan_stream(bucket.js, bucket.stream, [f"{bucket.prefix}>"]):
        if message.seq > started_at:
            continue  # written since we started (our own rewrites among them)
        outcome = _classify(bucket, stage, message)
        if outcome is not None:
            report += outcome
            continue
        pending.append(message)
        if len(pending) >= _CONCURRENCY:
            report += await _rewrite_all(bucket, pending)
            pending = []
    return report + await _rewrite_all(bucket, pending)


def _classify(
    bucket: BucketCore, stage: EncryptionStage, message: StoredMessage
) -> RekeyReport | None:
    """The count a message adds without a rewrite, or None if it needs one."""
    if op_from_headers(message.headers) is not Op.PUT:
        return RekeyReport()  # tombstones and markers are plain by design
    if any(token in ("*", ">") for token in message.subject.split(".")):
        return RekeyReport(skipped=1)  # a peer's literal wildcard subject: cannot publish to it
    try:
        key_id = stage.keyring.key_id_of(message.headers)
    except DecryptionError as exc:
        _log.warning("bucket %r: rekey skips %s: %s", bucket.name, message.subject, exc)
        return RekeyReport(skipped=1)
    if key_id == stage.keyring.primary:
        return RekeyReport(current=1)
    if key_id is None and not stage.allow_plaintext:
        _log.warning("bucket %r: rekey skips plain value %s", bucket.name, message.subject)
        return RekeyReport(skipped=1)
    return None


async def _rewrite_all(bucket: BucketCore, messages: list[StoredMessage]) -> RekeyReport:
    report = RekeyReport()
    if messages:
        try:
            async with asyncio.TaskGroup() as group:  # cancelling rekey cancels every write
                tasks = [group.create_task(_rewrite(bucket, message)) for message in messages]
        except ExceptionGroup as failed:
            # the first write's own error (the group cancelled the others): an ExceptionGroup
            # is outside the library's error tree
            raise failed.exceptions[0] from None
        for task in tasks:
            report += task.result()
    return report


async def _rewrite(bucket: BucketCore, message: StoredMessage) -> RekeyReport:
    try:
        plaintext = bucket.open(message.subject, message.data, message.headers, message.seq)
    except DecryptionError as exc:
        _log.warning("bucket %r: rekey skips %s: %s", bucket.name, message.subject, exc)
        return RekeyReport(skipped=1)
    try:
        headers = _ttl_headers(bucket, message)
    except InvalidTTLError:
        return RekeyReport(skipped=1)  # expires before a rewrite could keep its TTL
    data = bucket.seal(message.subject, plaintext, headers)
    headers[hdr.EXPECTED_LAST_SUBJECT_SEQUENCE] = str(message.seq)
    try:
        await bucket.js.publish(
            message.subject, data, headers=headers, msg_id=NUID().next().decode()
        )
    except WrongLastSequenceError:
        return RekeyReport(changed=1)
    except ValueTooLargeError as exc:
        # A value near max_payload: the compare-and-set header, a longer key id or a plain
        # value's envelope make the rewrite too large. It stays readable with its old key;
        # failing here would stop every later rewrite on every run.
        _log.warning("bucket %r: rekey skips %s: %s", bucket.name, message.subject, exc)
        return RekeyReport(skipped=1)
    return RekeyReport(rekeyed=1)


def _ttl_headers(bucket: BucketCore, message: StoredMessage) -> dict[str, str]:
    """The TTL headers that keep the value's expiry time: what is left of its TTL.

    Raises:
        InvalidTTLError: less than a second left (or less than the bucket's ``marker_ttl``
            floor on a bucket with history).
    """
    ttl = bucket.stored_ttl(message.headers)
    if ttl is None:
        return {}
    if ttl == NEVER:
        return bucket.ttl_headers("never")
    age = (datetime.now(UTC) - message.time).total_seconds()
    left = math.ceil(ttl - age)
    if left < 1:
        raise InvalidTTLError("expired")
    return bucket.ttl_headers(left)
