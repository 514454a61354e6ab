"""Object store operations cancelled at random points, racing each other, and against a paused
server: the store stays consistent (every live object whole, no chunk of no live object) once
the calls are over."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable

import jetstream
import objstore
from jetstream._consume.scan import scan_stream
from objstore import ObjectStore, _finish

SMALL = 1024


async def _chunk_counts(js: jetstream.JetStream, store: ObjectStore) -> Counter[str]:
    counts: Counter[str] = Counter()
    async for message in scan_stream(
        js, store.stream, [f"$O.{store.name}.C.>"], last_per_subject=False, headers_only=True
    ):
        counts[message.subject.rsplit(".", 1)[1]] += 1
    return counts


async def _problems(js: jetstream.JetStream, store: ObjectStore) -> dict[str, object]:
    live = {i.nuid: i for i in [i async for i in store.list()] if not i.is_link}
    counts = await _chunk_counts(js, store)
    dangling = {i.name: (i.chunks, counts[n]) for n, i in live.items() if counts[n] != i.chunks}
    orphans = {n: c for n, c in counts.items() if n not in live}
    return {k: v for k, v in {"dangling": dangling, "orphans": orphans}.items() if v}


async def _settled(js: jetstream.JetStream, store: ObjectStore, within: float = 1.0) -> dict:
    """Poll until consistent (background cleanups may still run), else the last problems."""
    deadline = time.monotonic() + within
    while True:
        problems = await _problems(js, store)
        if not problems or time.monotonic() > deadline:
            return problems
        await asyncio.sleep(0.05)


async def _background_done(within: float = 10.0) -> None:
    """Wait until what cancelled calls left running in the background has ended."""
    deadline = time.monotonic() + within
    while _finish._RUNNING and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert not _finish._RUNNING, "background work still running"


async def _cancel_after(call: Awaitable[object], delay: float) -> None:
    task = asyncio.ensure_future(call)
    await asyncio.sleep(delay)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await _background_done()


async def test_put_replacing_an_object_cancelled_anywhere_leaves_nothing_behind(
    store: ObjectStore, js: jetstream.JetStream
) -> None:
    rng = random.Random(1)
    await store.put("x", b"0" * 8 * SMALL, chunk_size=SMALL)
    bad = []
    for trial in range(40):
        await _cancel_after(
            store.put("x", bytes([trial]) * 8 * SMALL, chunk_size=SMALL), rng.uniform(0, 0.006)
        )
        problems = await _settled(js, store)
        if problems:
            bad.append((trial, problems))
    assert not bad, f"{len(bad)} of 40 cancelled puts left the store inconsistent: {bad[:3]}"


async def test_delete_cancelled_anywhere_leaves_nothing_behind(
    store: ObjectStore, js: jetstream.JetStream
) -> None:
    rng = random.Random(2)
    bad = []
    for trial in range(40):
        await store.put("d", b"d" * 4 * SMALL, chunk_size=SMALL)
        await _cancel_after(store.delete("d"), rng.uniform(0, 0.003))
        problems = await _settled(js, store)
        if problems:
            bad.append((trial, problems))
    assert not bad, f"{len(bad)} of 40 cancelled deletes left the store inconsistent: {bad[:3]}"


async def test_rename_cancelled_anywhere_leaves_one_name(
    store: ObjectStore, js: jetstream.JetStream
) -> None:
    rng = random.Random(3)
    bad = []
    for trial in range(40):
        await store.put(f"a{trial}", b"r" * 4 * SMALL, chunk_size=SMALL)
        await _cancel_after(
            store.update_meta(f"a{trial}", new_name=f"b{trial}"), rng.uniform(0, 0.004)
        )

        async def names(trial: int = trial) -> set[str]:
            live = set()
            for name in (f"a{trial}", f"b{trial}"):
                with contextlib.suppress(objstore.ObjectNotFoundError):
                    live.add((await store.info(name)).name)
            return live

        await _background_done()
        live = await names()
        if len(live) != 1:
            bad.append((trial, live))
    assert not bad, f"{len(bad)} of 40 cancelled renames left the object under both names: {bad}"
    assert not await _settled(js, store)


async def test_list_racing_a_rename_never_loses_the_object_and_ends(store: ObjectStore) -> None:
    """A listing that starts while a rename writes (copy, then the source's tombstone) shows
    the object under one name or both (never none: the copy is written first), and ends. It
    used to wait forever now and then (messages it counted were removed by the tombstone's
    rollup, so no delivered message ever said "nothing pending"), or 5 s until missed
    heartbeats recreated a consumer that sat on pending messages."""
    rng = random.Random(4)
    stalls = []
    for trial in range(40):
        await store.put(f"a{trial}", b"l" * 3 * SMALL, chunk_size=SMALL)
        rename = asyncio.ensure_future(store.update_meta(f"a{trial}", new_name=f"b{trial}"))
        await asyncio.sleep(rng.uniform(0, 0.004))
        started = time.monotonic()
        names = {i.name async for i in store.list()}
        stalls.append(time.monotonic() - started)
        await rename
        assert {f"a{trial}", f"b{trial}"} & names, "never under no name"  # both: mid-rename
        earlier = {f"a{t}" for t in range(trial)} | {f"b{t}" for t in range(trial)}
        assert earlier & names == {f"b{t}" for t in range(trial)}
    print(f"slowest listing racing a rename: {max(stalls):.2f}s")


async def test_cancelled_puts_into_a_nats_py_store_leave_nothing_behind(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
) -> None:
    """The acked fallback (no allow_batched): cancelled anywhere, never orphans."""
    import nats

    name = unique_name("rvpy")
    nc = await nats.connect(nats_server.url)
    try:
        await nc.jetstream().create_object_store(name)
        peer_store = await objstore.open_store(js, name)
        await peer_store.put("x", b"0" * 8 * SMALL, chunk_size=SMALL)
        rng = random.Random(5)
        bad = []
        for trial in range(40):
            data = bytes([trial]) * 8 * SMALL
            await _cancel_after(peer_store.put("x", data, chunk_size=SMALL), rng.uniform(0, 0.006))
            problems = await _settled(js, peer_store)
            if problems:
                bad.append((trial, problems))
        assert not bad, f"{len(bad)} of 40 cancelled fallback puts left problems: {bad[:3]}"
        obj = await (await nc.jetstream().object_store(name)).get("x")
        assert obj.data == await peer_store.get_bytes("x")  # nats-py reads what we wrote
    finally:
        await objstore.delete_store(js, name)
        await nc.close()
