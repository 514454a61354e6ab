"""How a store's operations say that the store is gone: StoreNotFoundError naming it."""

from __future__ import annotations

import functools

from jetstream import JetStream
from jetstream._api.missing_stream import MissingStream

from ._errors import StoreNotFoundError
from ._models import stream_name

__all__ = ["missing_store"]


def missing_store(js: JetStream, store: str) -> MissingStream:
    """Turns "stream not found" (and a 503 confirmed to mean it) from any operation on
    ``store`` into :class:`StoreNotFoundError` naming it (see :class:`MissingStream`)."""
    return MissingStream(js, stream_name(store), functools.partial(StoreNotFoundError, store))
