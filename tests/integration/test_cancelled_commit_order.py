"""A put cancelled during its commit must not overwrite a put that began after the caller saw
CancelledError (found by tests/model: 'upload lost: o1 holds #6 after #10')."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

import pytest

import jetstream
import objstore
from objstore import ObjectStore, _finish, _meta, _store


@pytest.fixture
async def store(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> AsyncIterator[ObjectStore]:
    created = await objstore.create_store(js, unique_name("cco"))
    yield created
    await objstore.delete_store(js, created.name)


async def test_cancelled_put_never_overwrites_a_later_completed_put(
    store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.put("x", b"0" * 3000, chunk_size=1024)
    a, b = b"A" * 5000, b"B" * 4000  # the sizes tell the two commits apart
    in_flight, release = asyncio.Event(), asyncio.Event()
    real_write = _meta.write_record

    async def write_record(s, info, ttl, *, expected, msg_id):  # type: ignore[no-untyped-def]
        if info.size == len(a) and not release.is_set():
            in_flight.set()  # A's first meta write is on its way ...
            await release.wait()  # ... and slow to arrive
        return await real_write(s, info, ttl, expected=expected, msg_id=msg_id)

    monkeypatch.setattr(_meta, "write_record", write_record)

    put_a = asyncio.ensure_future(store.put("x", a, chunk_size=1024))
    await asyncio.wait_for(in_flight.wait(), 5)
    await store.update_meta("x", description="racer")  # A's in-flight write will conflict
    put_a.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await put_a  # the caller sees CancelledError: A is over for them
    await store.put("x", b, chunk_size=1024)  # B begins after A was cancelled, and completes
    release.set()
    deadline = time.monotonic() + 10
    while _finish._RUNNING and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert not _finish._RUNNING
    assert await store.get_bytes("x") == b, "the cancelled put overwrote a later completed one"
    nuids = {
        m.subject.rsplit(".", 1)[1]
        async for m in jetstream.scan_stream(
            store._js, store.stream, [f"$O.{store.name}.C.>"], headers_only=True
        )
    }
    assert nuids == {(await store.info("x")).nuid}, "chunks left behind"


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
    monkeypatch.setattr(_store, "write_record", write_record)  # imported by name there
    return in_flight, release


async def _settled() -> None:
    deadline = time.monotonic() + 10
    while _finish._RUNNING and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert not _finish._RUNNING


async def test_a_cancelled_delete_never_deletes_a_later_put(
    store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.put("x", b"0" * 3000, chunk_size=1024)
    in_flight, release = _blocking_write(monkeypatch, lambda info: info.deleted)
    deleting = asyncio.ensure_future(store.delete("x"))
    await asyncio.wait_for(in_flight.wait(), 5)
    await store.update_meta("x", description="racer")  # the delete's tombstone will conflict
    deleting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await deleting
    await store.put("x", b"B" * 4000, chunk_size=1024)  # after the caller gave up the delete
    release.set()
    await _settled()
    assert await store.get_bytes("x") == b"B" * 4000, "the cancelled delete removed a later put"


async def test_a_cancelled_rename_never_moves_a_later_put(
    store: ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.put("x", b"0" * 3000, chunk_size=1024)
    in_flight, release = _blocking_write(monkeypatch, lambda i: i.name == "y" and i.size == 3000)
    renaming = asyncio.ensure_future(store.update_meta("x", new_name="y"))
    await asyncio.wait_for(in_flight.wait(), 5)
    await store.put("y", b"y")  # the target is written meanwhile: the copy will conflict
    await store.delete("y")
    renaming.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await renaming
    await store.put("x", b"B" * 4000, chunk_size=1024)  # after the caller gave up the rename
    release.set()
    await _settled()
    assert await store.get_bytes("x") == b"B" * 4000, "the cancelled rename moved a later put"
    with pytest.raises(objstore.ObjectNotFoundError):
        await store.info("y")
