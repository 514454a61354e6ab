"""A put cancelled during its commit must not overwrite a put that began after the caller saw
CancelledError (found by tests/model: 'upload lost: o1 holds #6 after #10')."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

import objstore
from jetstream._consume.scan import scan_stream
from objstore import ObjectStore, _finish, _meta, _rewrites


def _blocking_write(
    monkeypatch: pytest.MonkeyPatch, blocks: Callable[[objstore.ObjectInfo], bool]
) -> tuple[asyncio.Event, asyncio.Event]:
    """Hold the first meta write ``blocks`` selects until released (a slow network)."""
    in_flight, release = asyncio.Event(), asyncio.Event()
    real_write = _meta.write_record

    async def write_record(s, info, ttl, *, expected, msg_id):  # type: ignore[no-untyped-def]
        if blocks(info) and not release.is_set():
            in_flight.set()
            await release.wait()
        return await real_write(s, info, ttl, expected=expected, msg_id=msg_id)

    monkeypatch.setattr(_meta, "write_record", write_record)
    monkeypatch.setattr(_rewrites, "write_record", write_record)  # imported by name there
    return in_flight, release


async def _cancel_mid_write(
    monkeypatch: pytest.MonkeyPatch,
    blocks: Callable[[objstore.ObjectInfo], bool],
    call: Awaitable[object],
    racer: Callable[[], Awaitable[object]],
) -> asyncio.Event:
    """Run ``call`` until its meta write ``blocks`` selects is on its way, let ``racer`` make
    that write conflict, cancel the caller (who sees CancelledError), and return the event
    that lets the held write arrive."""
    in_flight, release = _blocking_write(monkeypatch, blocks)
    task = asyncio.ensure_future(call)
    await asyncio.wait_for(in_flight.wait(), 5)
    await racer()
    task.cancel()
    await asyncio.wait([task])
    assert task.cancelled()
    return release


async def _settled() -> None:
    """Every write that outlived its cancelled caller has ended."""
    deadline = time.monotonic() + 10
    while _finish._RUNNING and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert not _finish._RUNNING


async def test_cancelled_put_never_overwrites_a_later_completed_put(
    store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.put("x", b"0" * 3000, chunk_size=1024)
    a, b = b"A" * 5000, b"B" * 4000  # the sizes tell the two commits apart
    release = await _cancel_mid_write(
        monkeypatch,
        lambda info: info.size == len(a),
        store.put("x", a, chunk_size=1024),
        lambda: store.update_meta("x", description="racer"),  # A's write will conflict
    )
    await store.put("x", b, chunk_size=1024)  # B begins after A was cancelled, and completes
    release.set()
    await _settled()
    assert await store.get_bytes("x") == b, "the cancelled put overwrote a later completed one"
    nuids = {
        m.subject.rsplit(".", 1)[1]
        async for m in scan_stream(
            store.js, store.stream, [f"$O.{store.name}.C.>"], headers_only=True
        )
    }
    assert nuids == {(await store.info("x")).nuid}, "chunks left behind"


async def test_a_cancelled_delete_never_deletes_a_later_put(
    store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.put("x", b"0" * 3000, chunk_size=1024)
    release = await _cancel_mid_write(
        monkeypatch,
        lambda info: info.deleted,
        store.delete("x"),
        lambda: store.update_meta("x", description="racer"),  # the tombstone will conflict
    )
    await store.put("x", b"B" * 4000, chunk_size=1024)  # after the caller gave up the delete
    release.set()
    await _settled()
    assert await store.get_bytes("x") == b"B" * 4000, "the cancelled delete removed a later put"


async def test_a_cancelled_rename_never_moves_a_later_put(
    store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.put("x", b"0" * 3000, chunk_size=1024)

    async def write_the_target() -> None:  # the copy will conflict
        await store.put("y", b"y")
        await store.delete("y")

    release = await _cancel_mid_write(
        monkeypatch,
        lambda info: info.name == "y" and info.size == 3000,
        store.update_meta("x", new_name="y"),
        write_the_target,
    )
    await store.put("x", b"B" * 4000, chunk_size=1024)  # after the caller gave up the rename
    release.set()
    await _settled()
    assert await store.get_bytes("x") == b"B" * 4000, "the cancelled rename moved a later put"
    with pytest.raises(objstore.ObjectNotFoundError):
        await store.info("y")
