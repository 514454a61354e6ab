"""An upload's source file that changes while it is read (truncated, appended to, rewritten in
place, touched) fails the upload with SourceChangedError and stores nothing: no meta record, no
chunks, the previous version untouched. The change is made deterministically from the progress
callback, which runs between two reads of the file (after the first chunk went out)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from nats.js import JetStreamContext

import jetstream
import objstore
from jetstream import Keyring
from jetstream._options import ConnectionOptions
from objstore import ObjectStore
from objstore._many import UploadItem, upload_many
from tests.cli.cli_helpers import cli_command, cli_env

from ..proxy import TcpProxy

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


async def test_one_open_file_shared_by_concurrent_uploads_is_never_stored_torn(
    store: ObjectStore, tmp_path: Path
) -> None:
    """Two puts reading one file object take turns at its chunks: each read a part. A part
    stored as if it were the file is a torn object; only a put that read it all may succeed."""
    path = _source(tmp_path, chunks=16)
    whole = path.read_bytes()
    with path.open("rb") as file:
        results = await asyncio.gather(
            *(store.put(f"copy{i}", file, chunk_size=CHUNK) for i in range(2)),
            return_exceptions=True,
        )
    stored = [r for r in results if isinstance(r, objstore.ObjectInfo)]
    assert all(isinstance(r, objstore.SourceChangedError) for r in results if r not in stored)
    for info in stored:
        assert await store.get_bytes(info.name) == whole
    assert await _messages(store) == sum(info.chunks + 1 for info in stored)


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


def _descriptors_of(path: Path) -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}") == str(path)
    return count


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs Linux /proc")
async def test_a_path_upload_cancelled_midway_closes_its_file_and_stores_nothing(
    store: ObjectStore, tmp_path: Path
) -> None:
    path = _source(tmp_path)
    upload: asyncio.Future[objstore.ObjectInfo] = asyncio.ensure_future(
        store.put("x", path, chunk_size=CHUNK, progress=_after_first_chunk(lambda: upload.cancel()))
    )
    with pytest.raises(asyncio.CancelledError):
        await upload
    assert _descriptors_of(path) == 0, "the file the put opened is closed"
    await _nothing_stored(store)


async def test_an_unchanged_file_is_stored_whole(store: ObjectStore, tmp_path: Path) -> None:
    path = _source(tmp_path)
    calls: list[int | None] = []
    info = await store.put(
        "whole", path, chunk_size=CHUNK, progress=lambda done, total: calls.append(total)
    )
    assert await store.get_bytes("whole") == path.read_bytes()
    assert info.size == 8 * CHUNK and set(calls) == {8 * CHUNK}, "the total is the size at open"


async def test_a_file_replaced_by_a_rename_is_stored_as_it_was_opened(
    store: ObjectStore, tmp_path: Path
) -> None:
    """An editor's atomic save (write a new file, rename it over the old) leaves the open file
    whole: the upload reads the version it opened, consistently."""
    path = _source(tmp_path)
    before = path.read_bytes()

    def save_over() -> None:
        (tmp_path / "new").write_bytes(b"new version")
        os.replace(tmp_path / "new", path)

    await store.put("saved", path, chunk_size=CHUNK, progress=_after_first_chunk(save_over))
    assert await store.get_bytes("saved") == before


async def test_a_file_object_over_other_bytes_is_stored_as_read(
    store: ObjectStore, tmp_path: Path
) -> None:
    """gzip reads its file's descriptor but gives other bytes: its size is no measure."""
    data = os.urandom(3 * CHUNK)
    path = tmp_path / "data.gz"
    path.write_bytes(gzip.compress(data))
    with gzip.open(path, "rb") as file:
        await store.put("unzipped", file, chunk_size=CHUNK)
    assert await store.get_bytes("unzipped") == data


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
async def test_a_file_that_reports_no_size_is_stored_as_read(store: ObjectStore) -> None:
    """/proc files say size 0 yet have content: that is not a change."""
    info = await store.put("status", "/proc/self/status")
    assert info.size > 0 and b"Name:" in await store.get_bytes("status")


# -- uploads that take no progress callback: changed when their first chunk passes a proxy ------


@pytest.fixture
async def proxy(nats_server: jetstream.EmbeddedServer) -> AsyncIterator[TcpProxy]:
    proxy = await TcpProxy(nats_server.port).start()
    yield proxy
    await proxy.close()


def _shrink_at_first_chunk(proxy: TcpProxy, store: ObjectStore, path: Path) -> list[bool]:
    """Truncate ``path`` when the first chunk publish of ``store`` passes the proxy (before
    the server has it, so before any flow ack: the uploader has read a few chunks at most).
    Returns a list that holds True once that happened."""
    marker = f"$O.{store.name}.C.".encode()
    tail = b""
    fired: list[bool] = []

    def hook(data: bytes) -> bool:
        nonlocal tail
        if not fired and marker in tail + data:
            fired.append(True)
            _shrink(path)
        tail = data[-len(marker) :]
        return True

    proxy.on_client_bytes = hook
    return fired


@pytest.mark.parametrize("root", [False, True], ids=["path", "allowed_root"])
async def test_upload_many_reports_a_changed_file_and_stores_nothing(
    store: ObjectStore, proxy: TcpProxy, tmp_path: Path, root: bool
) -> None:
    """The Spark natsobj writer's path column goes through upload_many."""
    path = _source(tmp_path, chunks=64)
    fired = _shrink_at_first_chunk(proxy, store, path)
    connection = ConnectionOptions.from_strings({"servers": proxy.url})
    (outcome,) = await upload_many(
        connection,
        store.name,
        [UploadItem(name="torn", path=str(path))],
        allowed_root=str(tmp_path) if root else None,
    )
    assert fired
    assert outcome.size is None and outcome.error is not None
    assert outcome.error.startswith("SourceChangedError: ") and str(path) in outcome.error
    await _nothing_stored(store)


async def _cli(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *cli_command(*args),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=cli_env(),
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_cli_obj_put_of_a_changed_file_exits_1_and_stores_nothing(
    store: ObjectStore, proxy: TcpProxy, tmp_path: Path
) -> None:
    path = _source(tmp_path, chunks=64)
    fired = _shrink_at_first_chunk(proxy, store, path)
    code, out, err = await _cli("obj", "put", store.name, str(path), "--server", proxy.url)
    assert fired
    assert code == 1, err
    assert err.startswith(f"jetstore: error: SourceChangedError: {str(path)!r} changed"), err
    assert "nothing was stored" in err and "stored " not in out
    await _nothing_stored(store)


async def test_cli_obj_put_of_a_directory_stores_the_files_that_did_not_change(
    store: ObjectStore, proxy: TcpProxy, tmp_path: Path
) -> None:
    folder = tmp_path / "dir"
    folder.mkdir()
    changing = _source(tmp_path, chunks=64).rename(folder / "a.bin")  # uploaded first
    (folder / "b.txt").write_bytes(b"steady")
    fired = _shrink_at_first_chunk(proxy, store, changing)
    code, out, err = await _cli(
        "obj", "put", store.name, str(folder), "--parallel", "1", "--server", proxy.url
    )
    assert fired
    assert code == 1, err
    assert "SourceChangedError" in err and err.rstrip().endswith("(a.bin)"), err
    assert "stored b.txt" in out and "a.bin" not in out
    assert [i.name async for i in store.list()] == ["b.txt"]
    assert await store.get_bytes("b.txt") == b"steady"
    assert await _messages(store) == 2, "b.txt's chunk and meta record, nothing of a.bin"


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
