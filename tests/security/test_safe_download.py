"""get_file in a shared directory (issue 11, findings 2 and 3): the download never writes
through a link someone planted, and a failed download removes only what it created."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

import jetstream
import objstore
from objstore import ObjectStore

CHUNK = 1024
VICTIM = b"the victim's precious data"


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "elsewhere" / "victim.txt"
    victim.parent.mkdir()
    victim.write_bytes(VICTIM)
    return victim


def _ours(folder: Path) -> list[Path]:
    """Temporary files a download may have left (``.out.bin.<random>.part``)."""
    return sorted(folder.glob(".out.bin.*"))


async def test_a_symlink_planted_at_the_part_name_is_never_followed(
    store: ObjectStore, tmp_path: Path
) -> None:
    """The old code opened ``out.bin.part`` for writing, so the download overwrote the link's
    target, and ``os.replace`` then put the link in place of ``out.bin``."""
    data = os.urandom(5 * CHUNK + 7)
    await store.put("obj", data, chunk_size=CHUNK)
    victim = _victim(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    planted = shared / "out.bin.part"
    planted.symlink_to(victim)

    info = await store.get_file("obj", shared / "out.bin")

    assert victim.read_bytes() == VICTIM, "the link's target is untouched"
    target = shared / "out.bin"
    assert not target.is_symlink() and target.is_file()
    assert target.read_bytes() == data and info.size == len(data)
    assert planted.is_symlink() and os.readlink(planted) == str(victim), "not ours: left alone"
    assert _ours(shared) == []


async def test_a_symlink_at_the_target_is_replaced_not_written_through(
    store: ObjectStore, tmp_path: Path
) -> None:
    data = b"fresh object"
    await store.put("obj", data)
    victim = _victim(tmp_path)
    target = tmp_path / "out.bin"
    target.symlink_to(victim)
    await store.get_file("obj", target)
    assert victim.read_bytes() == VICTIM
    assert not target.is_symlink() and target.read_bytes() == data


async def test_the_temporary_file_is_new_and_the_calls_own(
    store: ObjectStore, tmp_path: Path
) -> None:
    """While chunks arrive, the data goes to a file the call created itself (exclusively,
    next to the target), never to a name chosen in advance; the result keeps the umask."""
    await store.put("obj", os.urandom(6 * CHUNK), chunk_size=CHUNK)
    seen: list[list[Path]] = []
    await store.get_file(
        "obj", tmp_path / "out.bin", progress=lambda d, t: seen.append(_ours(tmp_path))
    )
    partials = {p for listing in seen for p in listing}
    assert len(partials) == 1, partials
    (partial,) = partials
    assert partial.name.startswith(".out.bin.") and partial.name.endswith(".part")
    assert not partial.exists()
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "out.bin").stat().st_mode & 0o777 == 0o666 & ~umask


async def test_a_failed_download_leaves_existing_files_alone(
    store: ObjectStore, js: jetstream.JetStream, tmp_path: Path
) -> None:
    """A failed get_file used to delete ``<path>.part`` although it had not created it."""
    target = tmp_path / "out.bin"
    target.write_bytes(b"previous download")
    partial = tmp_path / "out.bin.part"
    partial.write_bytes(b"someone else's partial file")

    with pytest.raises(objstore.ObjectNotFoundError):
        await store.get_file("missing", target)

    info = await store.put("c", os.urandom(3 * CHUNK), chunk_size=CHUNK)
    forged = objstore.ObjectInfo(
        **{
            **{f: getattr(info, f) for f in info.__struct_fields__},
            "digest": "SHA-256=" + "A" * 43 + "=",
        }
    )
    await js.publish(
        f"$O.{store.name}.M.Yw==",
        objstore._models.encode_info(forged),
        headers={"Nats-Rollup": "sub"},
    )
    with pytest.raises(objstore.DigestMismatchError):
        await store.get_file("c", target)

    assert target.read_bytes() == b"previous download"
    assert partial.read_bytes() == b"someone else's partial file"
    assert _ours(tmp_path) == []


async def test_a_cancelled_download_removes_only_its_own_file(
    store: ObjectStore, tmp_path: Path
) -> None:
    await store.put("obj", os.urandom(40 * CHUNK), chunk_size=CHUNK)
    partial = tmp_path / "out.bin.part"
    partial.write_bytes(b"not ours")
    tasks: list[asyncio.Task[objstore.ObjectInfo]] = []

    def progress(done: int, total: int | None) -> None:
        if done >= 3 * CHUNK:
            tasks[0].cancel()  # the next await inside get_file raises CancelledError

    tasks.append(
        asyncio.create_task(store.get_file("obj", tmp_path / "out.bin", progress=progress))
    )
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(tasks[0], 20)
    assert not (tmp_path / "out.bin").exists()
    assert partial.read_bytes() == b"not ours"
    assert _ours(tmp_path) == []


async def test_a_download_cut_off_by_the_server_leaves_existing_files_alone(
    tmp_path: Path,
) -> None:
    server = jetstream.EmbeddedServer(store_dir=tmp_path / "store")
    server.start()
    try:
        async with await jetstream.connect(
            server.url, timeout=1.0, reconnect_time_wait=0.2, max_reconnect_attempts=-1
        ) as js:
            store = await objstore.create_store(js, "down")
            chunk = objstore.DEFAULT_CHUNK_SIZE
            await store.put("big", b"".join(bytes([i]) * chunk for i in range(96)))  # > window
            files = tmp_path / "files"
            files.mkdir()
            (files / "out.bin").write_bytes(b"previous download")
            (files / "out.bin.part").write_bytes(b"someone else's partial file")

            def progress(done: int, total: int | None) -> None:
                if server.running:
                    server.kill()

            with pytest.raises(jetstream.RequestTimeoutError):
                await asyncio.wait_for(
                    store.get_file("big", files / "out.bin", progress=progress, stall_timeout=2.0),
                    30,
                )
            assert (files / "out.bin").read_bytes() == b"previous download"
            assert (files / "out.bin.part").read_bytes() == b"someone else's partial file"
            assert sorted(p.name for p in files.iterdir()) == ["out.bin", "out.bin.part"]
            await asyncio.to_thread(server.start)  # leave the context connected to close
            deadline = asyncio.get_running_loop().time() + 20
            while not js.nc.is_connected:
                assert asyncio.get_running_loop().time() < deadline, "no reconnect"
                await asyncio.sleep(0.05)
    finally:
        server.close()


@pytest.mark.parametrize("path", ["out\0.bin", "", ".", "..", "/", 123, b"out.bin"])
async def test_get_file_refuses_a_path_that_names_no_file(
    store: ObjectStore, tmp_path: Path, path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Raw ValueError/TypeError from os and pathlib reached the caller (an embedded NUL, an
    empty name, a number); now a typed error before anything is read or created."""
    await store.put("o.bin", b"data")
    monkeypatch.chdir(tmp_path)  # relative paths land in the test's directory
    with pytest.raises(jetstream.ClientValidationError):
        await store.get_file("o.bin", path)  # type: ignore[arg-type]
    assert await asyncio.to_thread(os.listdir, tmp_path) == []
