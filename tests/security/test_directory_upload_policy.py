"""Uploading a directory takes its regular files (and links to regular files inside it) and
reports every other entry it leaves out: ``objstore.scan_directory`` says which and why, and
``jetstore obj put DIR`` prints a line for each and exits 1. Before, ``obj put DIR`` followed
links to files out of the tree (uploading what they pointed at) and silently left out links to
directories, dangling links, FIFOs and sockets, with exit 0. ``--follow-links``
(``follow_links=True``) follows every link, out of the tree too; loops are still skipped."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

import jetstream
import objstore
from tests.cli.cli_helpers import jetstore

SECRET = b"outside the tree"


class Tree:
    """``in/`` with every kind of entry, beside ``outside/``."""

    def __init__(self, base: Path) -> None:
        self.root = base / "in"
        outside = base / "outside"
        (self.root / "sub").mkdir(parents=True)
        outside.mkdir()
        (outside / "secret.txt").write_bytes(SECRET)
        (self.root / "a.txt").write_bytes(b"a")
        (self.root / "sub" / "b.txt").write_bytes(b"bb")
        (self.root / "link-in").symlink_to(self.root / "a.txt")
        (self.root / "link-out").symlink_to(outside / "secret.txt")
        (self.root / "dir-in").symlink_to(self.root / "sub", target_is_directory=True)
        (self.root / "dir-out").symlink_to(outside, target_is_directory=True)
        (self.root / "sub" / "loop").symlink_to(self.root, target_is_directory=True)
        (self.root / "dangling").symlink_to(base / "nowhere")
        (self.root / "self").symlink_to(self.root / "self")
        os.mkfifo(self.root / "fifo")
        os.mkdir(os.fsencode(self.root) + b"/bad-\xff")
        (Path(os.fsdecode(os.fsencode(self.root) + b"/bad-\xff")) / "x").write_bytes(b"x")
        self.socket = socket.socket(socket.AF_UNIX)
        self.socket.bind(os.path.relpath(self.root / "sock"))  # AF_UNIX paths are short

    def path(self, name: str) -> str:
        return os.fsdecode(os.fsencode(self.root) + b"/" + os.fsencode(name))


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tree]:
    monkeypatch.chdir(tmp_path)
    made = Tree(tmp_path)
    with made.socket:
        yield made


_SKIPPED = {
    "bad-\udcff": "name-not-utf8",
    "dangling": "dangling-link",
    "dir-in": "link-to-directory",
    "dir-out": "link-out",
    "fifo": "special",
    "link-out": "link-out",
    "self": "link-loop",
    "sock": "special",
    "sub/loop": "link-to-directory",
}


def test_the_scan_takes_regular_files_and_reports_every_other_entry(tree: Tree) -> None:
    scan = objstore.scan_directory(tree.root)
    assert [(f.name, f.size) for f in scan.files] == [
        ("a.txt", 1),
        ("link-in", 1),
        ("sub/b.txt", 2),
    ]
    assert {entry.path: entry.kind for entry in scan.skipped} == {
        tree.path(name): kind for name, kind in _SKIPPED.items()
    }
    reasons = {os.path.relpath(e.path, tree.root): e.reason for e in scan.skipped}
    assert reasons["fifo"] == "a FIFO, not a regular file"
    assert reasons["link-out"].startswith("a symbolic link that leads out of the directory (to ")


def test_following_links_takes_what_they_lead_to_and_still_skips_loops(tree: Tree) -> None:
    scan = objstore.scan_directory(str(tree.root), follow_links=True)
    assert [f.name for f in scan.files] == [
        "a.txt",
        "dir-in/b.txt",
        "dir-out/secret.txt",
        "link-in",
        "link-out",
        "sub/b.txt",
    ]
    assert {os.path.relpath(e.path, tree.root): e.kind for e in scan.skipped} == {
        "bad-\udcff": "name-not-utf8",
        "dangling": "dangling-link",
        "dir-in/loop": "link-loop",
        "fifo": "special",
        "self": "link-loop",
        "sock": "special",
        "sub/loop": "link-loop",
    }


def test_a_link_swapped_in_after_the_scan_is_refused_when_opened(tree: Tree) -> None:
    (scanned,) = [f for f in objstore.scan_directory(tree.root).files if f.name == "a.txt"]
    os.unlink(scanned.path)
    os.symlink(tree.root.parent / "outside" / "secret.txt", scanned.path)
    with pytest.raises(objstore.PathNotAllowedError):
        scanned.open()


@pytest.fixture
def deep(tmp_path: Path) -> Iterator[Path]:
    """1100 nested directories and a file (made and removed level by level: os.makedirs and
    shutil.rmtree recurse as deep)."""
    levels = [os.fspath(tmp_path / "deep")]
    levels += [levels[0] + "/d" * n for n in range(1, 1101)]
    for level in levels:
        os.mkdir(level)
    leaf = Path(levels[-1], "leaf")
    leaf.write_bytes(b"leaf")
    yield Path(levels[0])
    leaf.unlink()
    for level in reversed(levels):
        os.rmdir(level)


def test_a_tree_deeper_than_the_recursion_limit(deep: Path) -> None:
    (scanned,) = objstore.scan_directory(deep).files
    assert scanned.name == "d/" * 1100 + "leaf"


@pytest.mark.parametrize("bad", ["missing", "file", 42])
def test_only_a_directory_is_scanned(tmp_path: Path, bad: object) -> None:
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(jetstream.ClientValidationError, match="not a directory"):
        objstore.scan_directory(str(tmp_path / bad) if isinstance(bad, str) else bad)  # type: ignore[arg-type]


async def test_a_name_that_is_not_utf8_is_refused_by_put(store: objstore.ObjectStore) -> None:
    """A file name's undecodable bytes (``os.fsdecode``) as an object name raised a raw
    UnicodeEncodeError from deep inside the upload."""
    with pytest.raises(objstore.InvalidObjectNameError, match="not UTF-8"):
        await store.put("bad-\udcff", b"x")
    assert [info.name async for info in store.list()] == []


async def _stored(store: objstore.ObjectStore) -> dict[str, bytes]:
    return {info.name: await store.get_bytes(info.name) async for info in store.list()}


async def test_obj_put_reports_each_skipped_entry_and_exits_1(
    tree: Tree, store: objstore.ObjectStore, nats_server: jetstream.EmbeddedServer
) -> None:
    run = jetstore("obj", "put", store.name, str(tree.root), "-s", nats_server.url)
    assert run.code == 1, run.err
    lines = run.err.splitlines()
    assert lines == [
        f"jetstore: error: skipped {entry.path!r}: {entry.reason}"
        for entry in objstore.scan_directory(tree.root).skipped
    ]
    assert len(lines) == len(_SKIPPED)
    assert await _stored(store) == {"a.txt": b"a", "link-in": b"a", "sub/b.txt": b"bb"}


async def test_obj_put_follow_links_uploads_what_links_lead_to(
    tmp_path: Path, store: objstore.ObjectStore, nats_server: jetstream.EmbeddedServer
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data.txt").write_bytes(b"data")
    root = tmp_path / "in"
    root.mkdir()
    (root / "file").symlink_to(outside / "data.txt")
    (root / "dir").symlink_to(outside, target_is_directory=True)
    url = ("-s", nats_server.url)
    refused = jetstore("obj", "put", store.name, str(root), *url)
    assert refused.code == 2 and "no files to upload under" in refused.err, refused.err
    assert refused.err.count("jetstore: error: skipped ") == 2
    assert await _stored(store) == {}
    followed = jetstore("obj", "put", store.name, str(root), "--follow-links", *url)
    assert followed.code == 0 and followed.err == "", followed.err
    assert await _stored(store) == {"dir/data.txt": b"data", "file": b"data"}
