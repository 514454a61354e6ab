"""Following object links to the object they name, a bounded number of hops.

Our ``add_link`` (like nats.go's ``AddLink``) refuses links to links, but any peer may write a
link record naming another link; nats.go's ``Get`` follows such chains recursively without a
bound. Reads here follow at most :data:`MAX_LINK_DEPTH` links and refuse loops, so a chain
``A -> B -> A`` is an error instead of an endless walk (or, as before, empty bytes).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from jetstream import ClientValidationError

from ._errors import ObjectLinkError
from ._models import ObjectInfo

__all__ = ["MAX_LINK_DEPTH", "follow_links"]

MAX_LINK_DEPTH = 8
"""Links a read follows from the name it was given to the object it reads."""


class _Store(Protocol):
    """What following links needs of a store: its name and its objects' records."""

    @property
    def name(self) -> str: ...

    async def info(self, name: str) -> ObjectInfo: ...


S = TypeVar("S", bound=_Store)


async def follow_links(
    store: S,
    info: ObjectInfo,
    open_store: Callable[[S, str], Awaitable[S]],
) -> tuple[S, ObjectInfo]:
    """The store and record of the object ``info`` leads to (itself when not a link).
    ``open_store(current, name)`` opens another store a link points into.

    Raises:
        ObjectLinkError: the links loop or chain more than MAX_LINK_DEPTH deep.
        ClientValidationError: a link to a whole store.
        ObjectNotFoundError, StoreNotFoundError: a link to a missing object or store.
        InvalidObjectMetaError: a record on the way is not trustworthy.
    """
    chain = [(store.name, info.name)]
    while info.link is not None:
        link = info.link
        if not link.name:
            raise ClientValidationError(f"{info.name!r} links to a whole store, not an object")
        hop = (link.bucket, link.name)
        shown = tuple(f"{s}/{n}" for s, n in [*chain, hop])
        if hop in chain:
            raise ObjectLinkError(f"object links loop: {' -> '.join(shown)}", shown)
        if len(chain) > MAX_LINK_DEPTH:
            raise ObjectLinkError(
                f"more than {MAX_LINK_DEPTH} links from {shown[0]!r}: {' -> '.join(shown)}", shown
            )
        chain.append(hop)
        if link.bucket != store.name:
            store = await open_store(store, link.bucket)
        info = await store.info(link.name)
    return store, info
