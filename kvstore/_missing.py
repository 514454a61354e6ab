"""How a bucket's operations say that the bucket is gone: BucketNotFoundError naming it."""

from __future__ import annotations

import functools

from jetstream import JetStream
from jetstream._api.missing_stream import MissingStream

from ._errors import BucketNotFoundError
from ._models import stream_name

__all__ = ["missing_bucket"]


def missing_bucket(js: JetStream, bucket: str) -> MissingStream:
    """Turns "stream not found" (and a 503 confirmed to mean it) from any operation on
    ``bucket`` into :class:`BucketNotFoundError` naming it (see :class:`MissingStream`)."""
    return MissingStream(js, stream_name(bucket), functools.partial(BucketNotFoundError, bucket))
