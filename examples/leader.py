"""Leader election: three worker processes campaign for one role; the leader does the work
(writes fenced by its lease, so a deposed leader's writes are refused by the server); the
leader is killed (-9) and another worker takes over once its lease's TTL runs out.

Every worker is a child process running this file with ``worker``. Runs against $NATS_URL
when set, otherwise an embedded nats-server on a free loopback port.

    python examples/leader.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator

import jetstream
import kvstore

BUCKET, ROLE = "example-leaders", "leaders.indexer"
WORKERS = ["worker-1", "worker-2", "worker-3"]
TTL = 3  # seconds: how long a dead leader keeps the role


@contextlib.asynccontextmanager
async def nats_url() -> AsyncIterator[str]:
    """$NATS_URL if given, else the URL of an embedded server that lives for the block."""
    if url := os.environ.get("NATS_URL"):
        print(f"using the NATS server at {url} (from NATS_URL)")
        yield url
        return
    async with jetstream.EmbeddedServer() as server:
        print(f"using an embedded nats-server at {server.url} (pid {server.pid})")
        yield server.url


# -- the worker (a child process) -------------------------------------------------------------


async def worker(url: str, name: str) -> None:
    """Campaign as ``name``; while leading, write a tick every 0.2 s, fenced by the lease."""
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.open_bucket(js, BUCKET)
        election = bucket.election(ROLE, ttl=TTL)
        async with election.campaign(name.encode()) as lease:
            print(f"leading with token {lease.token}", flush=True)
            tick = 0
            while True:
                tick += 1
                # Stored only while this worker still leads: the server checks the lease.
                await bucket.put("indexer.tick", f"{name} {tick}".encode(), fence=lease)
                await asyncio.sleep(0.2)


# -- the demo ---------------------------------------------------------------------------------


async def demo(url: str) -> None:
    async with await jetstream.connect(url) as js:
        with contextlib.suppress(kvstore.BucketNotFoundError):
            await kvstore.delete_bucket(js, BUCKET)
        bucket = await kvstore.create_bucket(js, BUCKET, marker_ttl="1s")
        election = bucket.election(ROLE, ttl=TTL)
        children = {name: await _start(url, name) for name in WORKERS}
        try:
            leaders = aiter(election.observe())  # every new leader, once
            first = (await anext(leaders)).decode()
            print(f"leader: {first}")
            await _ticking(bucket, first)
            children[first].kill()  # kill -9: no resignation, the lease must run out
            killed = time.monotonic()
            print(f"killed {first}")
            second = (await anext(leaders)).decode()
            print(f"new leader: {second} after {time.monotonic() - killed:.1f}s (TTL {TTL}s)")
            assert second != first
            await _ticking(bucket, second)
            print(f"ticks now come from {second}; leader() says {await election.leader()!r}")
            await leaders.aclose()
        finally:
            for child in children.values():
                if child.returncode is None:
                    child.terminate()
                await child.wait()
        await kvstore.delete_bucket(js, BUCKET)


async def _ticking(bucket: kvstore.Bucket, name: str) -> None:
    """Return once the latest tick is ``name``'s."""
    while True:
        with contextlib.suppress(kvstore.KeyNotFoundError):
            if (await bucket.get("indexer.tick")).value.split()[0] == name.encode():
                return
        await asyncio.sleep(0.05)


async def _start(url: str, name: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, __file__, "worker", url, name, stdout=asyncio.subprocess.DEVNULL
    )


async def main() -> None:
    async with nats_url() as url:
        await demo(url)


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(worker(sys.argv[2], sys.argv[3]))
    else:
        asyncio.run(main())
