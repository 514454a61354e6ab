"""Least-privilege permission templates for bucket users (what each grants and what it still
allows is in ``docs/SECURITY.md``)."""

from __future__ import annotations

from collections.abc import Iterable

from jetstream._protocol.bucket_config import validate_bucket_name
from jetstream._protocol.permissions import (
    API,
    Permissions,
    SubjectRule,
    consumer_rights,
    inbox_subjects,
    protected_consumers,
)

from ._keys import validate_key

__all__ = ["prefix_writer_permissions", "reader_permissions", "writer_permissions"]


def reader_permissions(
    bucket: str, *, inbox_prefix: str, protect_consumers: Iterable[str] = ()
) -> Permissions:
    """Read one bucket: ``get`` (any revision), ``get_many``, ``watch``, ``keys``, ``history``.

    ``protect_consumers`` names durable consumers on the bucket's stream (consumer groups,
    work queues) the reader must not touch; connect with ``inbox_prefix=inbox_prefix``.

    Raises:
        InvalidBucketNameError: bad bucket name.
        ClientValidationError: a shared or malformed inbox prefix, or a bad consumer name.
    """
    validate_bucket_name(bucket)
    stream = f"KV_{bucket}"
    return Permissions(
        publish=SubjectRule(
            allow=(*_lookup(stream), *_reads(stream, f"$KV.{bucket}.>")),
            deny=protected_consumers(stream, tuple(protect_consumers)),
        ),
        subscribe=SubjectRule(allow=inbox_subjects(inbox_prefix)),
    )


def writer_permissions(
    bucket: str, *, inbox_prefix: str, protect_consumers: Iterable[str] = ()
) -> Permissions:
    """Read and write one whole bucket: everything of :func:`reader_permissions` plus every
    write (``purge_deletes`` included: a writer may erase the bucket with a rollup anyway),
    and the leader's message lookups that settle a write whose answer was lost.

    Raises:
        InvalidBucketNameError: bad bucket name.
        ClientValidationError: a shared or malformed inbox prefix, or a bad consumer name.
    """
    reader = reader_permissions(
        bucket, inbox_prefix=inbox_prefix, protect_consumers=protect_consumers
    )
    stream = f"KV_{bucket}"
    writes = (
        f"$KV.{bucket}.>",
        f"{API}.STREAM.PURGE.{stream}",
        f"{API}.STREAM.MSG.GET.{stream}",
        f"{API}.STREAM.NAMES",
    )
    return Permissions(
        publish=SubjectRule(allow=(*reader.publish.allow, *writes), deny=reader.publish.deny),
        subscribe=reader.subscribe,
    )


def prefix_writer_permissions(bucket: str, prefix: str, *, inbox_prefix: str) -> Permissions:
    """Write, and read back by key, the keys under ``<prefix>.``: ``put``, ``create``,
    ``update``, ``delete``, ``purge``, ``put_many`` and ``get`` (latest value) of those keys.

    The server refuses this user every read and write of other keys. It cannot refuse a
    ``Nats-Rollup: all`` header on an allowed subject, which erases the whole bucket, nor keep
    ``STREAM.INFO`` from listing key names: a prefix writer is trusted with the bucket's
    integrity (one bucket per tenant when writers are hostile; see ``docs/SECURITY.md``).

    Raises:
        InvalidBucketNameError: bad bucket name.
        InvalidKeyError: ``prefix`` is not a key (wildcards, spaces, empty).
        ClientValidationError: a shared or malformed inbox prefix.
    """
    validate_bucket_name(bucket)
    validate_key(prefix)
    stream = f"KV_{bucket}"
    keys = f"$KV.{bucket}.{prefix}.>"
    return Permissions(
        publish=SubjectRule(allow=(*_lookup(stream), keys, f"{API}.DIRECT.GET.{stream}.{keys}")),
        subscribe=SubjectRule(allow=inbox_subjects(inbox_prefix)),
    )


def _lookup(stream: str) -> tuple[str, ...]:
    """The account's API level and the stream's configuration (``open_bucket``)."""
    return (f"{API}.INFO", f"{API}.STREAM.INFO.{stream}")


def _reads(stream: str, subjects: str) -> tuple[str, ...]:
    """Direct gets of any message and consumers over ``subjects``."""
    return (
        f"{API}.DIRECT.GET.{stream}",
        f"{API}.DIRECT.GET.{stream}.>",
        f"{API}.CONSUMER.CREATE.{stream}.*",
        f"{API}.CONSUMER.INFO.{stream}.*",
        *consumer_rights(stream, subjects),
    )
