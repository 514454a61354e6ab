"""Least-privilege permission templates for object store users (what each grants and what it
still allows is in ``docs/SECURITY.md``)."""

from __future__ import annotations

from jetstream._protocol.bucket_config import validate_bucket_name
from jetstream._protocol.permissions import (
    API,
    Permissions,
    SubjectRule,
    consumer_rights,
    inbox_subjects,
)

__all__ = ["reader_permissions", "uploader_permissions"]


def reader_permissions(store: str, *, inbox_prefix: str) -> Permissions:
    """Read one store: ``get``, ``get_bytes``, ``get_file``, ``info``, ``list``, ``watch``.
    Connect with ``inbox_prefix=inbox_prefix``.

    Raises:
        InvalidBucketNameError: bad store name.
        ClientValidationError: a shared or malformed inbox prefix.
    """
    validate_bucket_name(store)
    stream = f"OBJ_{store}"
    return Permissions(
        publish=SubjectRule(
            allow=(
                f"{API}.INFO",
                f"{API}.STREAM.INFO.{stream}",
                f"{API}.DIRECT.GET.{stream}",
                f"{API}.DIRECT.GET.{stream}.>",
                f"{API}.CONSUMER.CREATE.{stream}.*",
                f"{API}.CONSUMER.INFO.{stream}.*",
                *consumer_rights(stream, f"$O.{store}.>"),
            )
        ),
        subscribe=SubjectRule(allow=inbox_subjects(inbox_prefix)),
    )


def uploader_permissions(store: str, *, inbox_prefix: str) -> Permissions:
    """Read and write one store: everything of :func:`reader_permissions` plus ``put``,
    ``put_file``, ``update_meta``, ``delete``, links and ``cleanup`` (the purge that removes a
    failed upload's chunks, and the leader's lookups that conditional meta writes read).

    The server cannot limit a purge request's filter nor refuse a ``Nats-Rollup: all`` header,
    so an uploader is trusted with the store's integrity (one store per tenant when writers are
    hostile; see ``docs/SECURITY.md``).

    Raises:
        InvalidBucketNameError: bad store name.
        ClientValidationError: a shared or malformed inbox prefix.
    """
    reader = reader_permissions(store, inbox_prefix=inbox_prefix)
    stream = f"OBJ_{store}"
    writes = (
        f"$O.{store}.>",
        f"{API}.STREAM.PURGE.{stream}",
        f"{API}.STREAM.MSG.GET.{stream}",
        f"{API}.STREAM.NAMES",
    )
    return Permissions(
        publish=SubjectRule(allow=(*reader.publish.allow, *writes)),
        subscribe=reader.subscribe,
    )
