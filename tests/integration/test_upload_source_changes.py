"""An upload's source file that changes while it is read (truncated, appended to, rewritten in
place, touched) fails the upload with SourceChangedError and stores nothing: no meta record, no
chunks, the previous version untouched. The change is made deterministically from the progress
callback, which runs between two reads of the file (after the first chunk went out)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from nats.js import JetStreamContext

import jetstream
import objstore
from jetstream import Keyring
from objstore import ObjectStore

pytestmark = pytest.mark.integration

CHUNK = 64 * 1024
HOUR_AGO_NS = 3600 * 10**9


def _source(tmp_path: Path, chunks: int = 8) -> Path:
    """A file of ``chunks`` whole chunks, last modified an hour ago: a write during the upload
    moves its mtime whatever the file system's timestamp granularity."""
    path = tmp_path / "source.bin"
    path.write_bytes(os.urandom(chunks * CHUNK))
    stamp = path.stat().st_mtime_ns - HOUR_AGO_NS
    os.utime(path, ns=(stamp, stamp))
    return path


def _shrink(path: Path) -> None:
    os.truncate(path, 1000)


def _grow(path: Path) -> None:
    with path.open("ab") as file:
        file.write(os.urandom(CHUNK))


def _rewrite(path: Path) -> None:
    """Same size, other bytes (written in place, as an editor saving over it would)."""
    with path.open("r+b") as file:
        file.write(os.urandom(CHUNK))


def _touch(path: Path) -> None:
    os.utime(path)


CHANGES = {"shrunk": _shrink, "grown": _grow, "rewritten": _rewrite, "touched": _touch}


def _after_first_chunk(change: Callable[[], None]) -> Callable[[int, int | None], None]:
    """A progress callback that makes ``change`` once, right after the first chunk was sent
    (the upload reads the next chunk only after the callback returned)."""
    changed = False

    def progress(done: int, total: int | None) -> None:
        nonlocal changed
        if not changed:
            changed = True
            change()

    return progress


async def _messages(store: ObjectStore) -> int:
    return (await store.status()).stream_info.state.messages


async def _nothing_stored(store: ObjectStore) -> None:
    assert [i async for i in store.list()] == []
    assert await _messages(store) == 0, "no chunk and no meta record of the failed upload stays"


@pytest.mark.parametrize("how", list(CHANGES))
async def test_a_path_changed_during_the_upload_stores_nothing(
    store: ObjectStore, tmp_path: Path, how: str
) -> None:
    path = _source(tmp_path)
    with pytest.raises(objstore.SourceChangedError) as caught:
        await store.put(
            "torn",
            path,
            chunk_size=CHUNK,
            progress=_after_first_chunk(lambda: CHANGES[how](path)),
        )
    assert isinstance(caught.value, objstore.UploadFailedError)
    assert str(path) in str(caught.value) and "nothing was stored" in str(caught.value)
    await _nothing_stored(store)


@pytest.mark.parametrize("how", ["rewritten", "touched"])
async def test_a_change_after_the_last_chunk_was_read_is_caught_before_the_commit(
    store: ObjectStore, tmp_path: Path, how: str
) -> None:
    """Two chunks: both are read before the first goes out, so the change is only visible at
    the end of the file (the check before the last chunk and the meta record are sent)."""
    path = _source(tmp_path, chunks=2)
    with pytest.raises(objstore.SourceChangedError):
        await store.put(
            "torn", path, chunk_size=CHUNK, progress=_after_first_chunk(lambda: CHANGES[how](path))
        )
    await _nothing_stored(store)


async def test_a_failed_replacement_leaves_the_previous_version(
    store: ObjectStore, tmp_path: Path
) -> None:
    await store.put("kept", b"version 1")
    path = _source(tmp_path)
    with pytest.raises(objstore.SourceChangedError):
        await store.put(
            "kept", path, chunk_size=CHUNK, progress=_after_first_chunk(lambda: _shrink(path))
        )
    assert await store.get_bytes("kept") == b"version 1"
    assert await _messages(store) == 2, "only version 1's chunk and meta record"


@pytest.mark.parametrize("how", ["shrunk", "grown", "rewritten"])
async def test_an_open_file_changed_during_the_upload_stores_nothing(
    store: ObjectStore, tmp_path: Path, how: str
) -> None:
    path = _source(tmp_path)
    with path.open("rb") as file:
        file.seek(CHUNK)  # read from where the file stands: its size is counted from there
        with pytest.raises(objstore.SourceChangedError):
            await store.put(
                "torn",
                file,
                chunk_size=CHUNK,
                progress=_after_first_chunk(lambda: CHANGES[how](path)),
            )
        assert not file.closed, "the caller's file stays open"
    await _nothing_stored(store)


async def test_an_open_file_read_from_its_middle_uploads_the_rest(
    store: ObjectStore, tmp_path: Path
) -> None:
    path = _source(tmp_path, chunks=3)
    with path.open("rb") as file:
        file.seek(CHUNK + 5)
        info = await store.put("rest", file, chunk_size=CHUNK)
    assert await store.get_bytes("rest") == path.read_bytes()[CHUNK + 5 :]
    assert info.size == 2 * CHUNK - 5


async def test_an_encrypted_upload_of_a_changed_file_stores_nothing(
    make_store: Callable[..., object], tmp_path: Path
) -> None:
    store = await make_store(encryption=Keyring({"k1": os.urandom(32)}, primary="k1"))  # type: ignore[misc]
    path = _source(tmp_path)
    with pytest.raises(objstore.SourceChangedError):
        await store.put(
            "torn", path, chunk_size=CHUNK, progress=_after_first_chunk(lambda: _grow(path))
        )
    await _nothing_stored(store)


async def test_an_upload_over_acked_publishes_of_a_changed_file_stores_nothing(
    js: jetstream.JetStream,
    peer: JetStreamContext,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    """A store made by nats-py (no allow_batched) takes the upload over acked publishes."""
    name = unique_name("peer")
    await peer.create_object_store(name)
    try:
        store = await objstore.open_store(js, name)
        path = _source(tmp_path)
        with pytest.raises(objstore.SourceChangedError):
            await store.put(
                "torn", path, chunk_size=CHUNK, progress=_after_first_chunk(lambda: _shrink(path))
            )
        await _nothing_stored(store)
    finally:
        await objstore.delete_store(js, name)


async def test_an_unchanged_file_is_stored_whole(store: ObjectStore, tmp_path: Path) -> None:
    path = _source(tmp_path)
    calls: list[int | None] = []
    info = await store.put(
        "whole", path, chunk_size=CHUNK, progress=lambda done, total: calls.append(total)
    )
    assert await store.get_bytes("whole") == path.read_bytes()
    assert info.size == 8 * CHUNK and set(calls) == {8 * CHUNK}, "the total is the size at open"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
async def test_a_file_that_reports_no_size_is_stored_as_read(store: ObjectStore) -> None:
    """/proc files say size 0 yet have content: that is not a change."""
    info = await store.put("status", "/proc/self/status")
    assert info.size > 0 and b"Name:" in await store.get_bytes("status")


# -- a str source is a path ----------------------------------------------------------------------


async def test_a_str_that_names_no_file_says_it_was_taken_as_a_path(store: ObjectStore) -> None:
    with pytest.raises(objstore.SourceNotFoundError) as caught:
        await store.put("a", "some text")
    error = caught.value
    assert isinstance(error, jetstream.ClientValidationError)
    assert isinstance(error, FileNotFoundError), "still caught as the OS error it was"
    assert "'some text'" in str(error) and "taken as a path" in str(error)
    assert "bytes" in str(error), "says how to store the text itself"
    await _nothing_stored(store)


@pytest.mark.parametrize("source", ["directory", "nul"])
async def test_a_path_that_cannot_be_opened_is_a_typed_error(
    store: ObjectStore, tmp_path: Path, source: str
) -> None:
    path = str(tmp_path) if source == "directory" else "bad\0name"
    with pytest.raises(objstore.UnreadableSourceError) as caught:
        await store.put("a", path)
    assert isinstance(caught.value, jetstream.ClientValidationError)
    assert repr(path) in str(caught.value)
    await _nothing_stored(store)
