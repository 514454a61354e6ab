"""kill -9 the server during a loop of put_many calls, restart it on the same store, and check
that every batch that returned revisions is fully stored and no batch is partially stored."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from pathlib import Path

import jetstream
import kvstore
from jetstream._consume.scan import scan_stream

FIELDS = 5
KILLS = 3


async def test_kill_9_during_put_many_never_leaves_half_a_record(tmp_path: Path) -> None:
    server = jetstream.EmbeddedServer(store_dir=tmp_path / "store")
    server.start()
    try:
        results = await _write_through_kills(server)
        await _verify(server, results)
    finally:
        server.close()


async def _write_through_kills(
    server: jetstream.EmbeddedServer,
) -> dict[int, dict[str, int] | BaseException]:
    results: dict[int, dict[str, int] | BaseException] = {}
    calls = iter(range(1_000_000))
    killed = asyncio.Event()
    async with await jetstream.connect(
        server.url, timeout=1.0, reconnect_time_wait=0.1, max_reconnect_attempts=-1
    ) as js:
        bucket = await kvstore.create_bucket(js, "crash", history=1)

        async def writer() -> None:
            while not killed.is_set() or len(results) < 40:
                call = next(calls)
                record = {f"c{call}.f{j}": str(call).encode() for j in range(FIELDS)}
                try:
                    results[call] = await bucket.put_many(record, deadline=30)
                except jetstream.JetStreamError as exc:
                    results[call] = exc

        async def killer() -> None:
            rng = random.Random(7)
            for _ in range(KILLS):
                await asyncio.sleep(rng.uniform(0.3, 0.8))
                await asyncio.to_thread(server.kill)
                await asyncio.sleep(0.2)
                await asyncio.to_thread(server.start)
            killed.set()

        await asyncio.wait_for(asyncio.gather(writer(), writer(), killer()), timeout=90)
    return results


async def _verify(
    server: jetstream.EmbeddedServer, results: dict[int, dict[str, int] | BaseException]
) -> None:
    async with await jetstream.connect(server.url) as js:
        stored: Counter[int] = Counter()
        async for message in scan_stream(js, "KV_crash", ["$KV.crash.>"]):
            call = int(message.subject.split(".")[2][1:])
            assert message.data == str(call).encode()
            stored[call] += 1
        for call, count in stored.items():
            assert count == FIELDS, f"batch {call} is partially stored ({count}/{FIELDS})"
        acked = {c: r for c, r in results.items() if isinstance(r, dict)}
        failed = {c: r for c, r in results.items() if not isinstance(r, dict)}
        for call, revisions in acked.items():
            assert stored[call] == FIELDS, f"batch {call} returned revisions but is missing"
            for key, revision in revisions.items():
                message = await js.get_message("KV_crash", revision)
                assert (message.subject, message.data) == (f"$KV.crash.{key}", str(call).encode())
        unknown = [c for c, e in failed.items() if isinstance(e, jetstream.CommitUnknownError)]
        for call, error in failed.items():
            if call not in unknown:
                assert stored[call] == 0, f"batch {call} failed ({error!r}) but was stored"
        assert not unknown, "the server came back well within the deadline"
        assert len(acked) >= 40 and len(failed) <= KILLS * 2
