"""How the tests read a bucket through nats-py, the peer, around its known races."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import nats.js.errors
from nats.js.kv import KeyValue

T = TypeVar("T")


async def peer_keys(kv: KeyValue, attempts: int = 5) -> list[str]:
    """nats-py's ``kv.keys()``, asked again when it says "no keys found" too early.

    nats-py's watch puts its end-of-snapshot marker first when its consumer info reports
    nothing pending and nothing delivered yet, which happens once the server has sent every
    message before the client processed one (seen in a loaded CI run): ``keys()`` then raises
    ``NoKeysError`` on a bucket with keys. A bucket without keys raises it every time.
    """
    return await _past_the_early_end(kv.keys, attempts)


async def peer_history(kv: KeyValue, key: str, attempts: int = 5) -> list[KeyValue.Entry]:
    """nats-py's ``kv.history(key)``, around the same race as :func:`peer_keys`."""
    return await _past_the_early_end(lambda: kv.history(key), attempts)


async def _past_the_early_end(read: Callable[[], Awaitable[T]], attempts: int) -> T:
    for _ in range(attempts - 1):
        try:
            return await read()
        except nats.js.errors.NoKeysError:
            continue
    return await read()
