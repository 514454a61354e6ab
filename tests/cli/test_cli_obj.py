"""``jetstore obj``: every verb as a subprocess against a real server; files uploaded and
downloaded compared byte for byte; progress bars under a pseudo-terminal and none when piped."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pexpect
import pytest

import jetstream
import objstore

from .cli_helpers import ROOT, cli_command, cli_env, jetstore, jetstore_all

pytestmark = pytest.mark.integration

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


async def test_store_verbs_add_info_ls_rm(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
) -> None:
    name = unique_name("obj")
    url = ("--server", nats_server.url)
    added = jetstore(
        "obj", "add", name, "--max-age", "30d", "--description", "reports", "--json", *url
    )
    assert added.code == 0, added.err
    assert json.loads(added.out) == {
        "store": name,
        "size": 0,
        "sealed": False,
        "max_age": 30 * 86400,
        "marker_ttl": None,
        "max_bytes": -1,
        "storage": "file",
        "replicas": 1,
        "compression": False,
        "description": "reports",
        "metadata": {},
    }
    info, stores, refused = jetstore_all(
        ("obj", "info", name, *url), ("obj", "ls", "--json", *url), ("obj", "rm", name, *url)
    )
    assert info.code == 0 and f"store: {name}\n" in info.text and "sealed: false\n" in info.text
    assert name in json.loads(stores.out)
    assert refused.code == 2 and "--force" in refused.err
    assert jetstore("obj", "rm", name, "--force", *url).code == 0
    gone = jetstore("obj", "info", name, *url)
    assert gone.code == 1 and gone.err.startswith("jetstore: error: StoreNotFoundError")


async def test_directory_round_trip_piped(
    store: objstore.ObjectStore, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    url = ("--server", nats_server.url)
    source = tmp_path / "data"
    (source / "sub" / "deep").mkdir(parents=True)
    (source / "a.txt").write_bytes(b"hello\n")
    (source / "sub" / "b.bin").write_bytes(os.urandom(300_000))
    (source / "sub" / "deep" / "empty").write_bytes(b"")
    put = jetstore(
        "obj",
        "put",
        store.name,
        str(source),
        "--meta",
        "run=7",
        "--ttl",
        "1h",
        "--parallel",
        "2",
        *url,
    )
    assert put.code == 0, put.err
    lines = sorted(put.text.splitlines())  # one parseable line per object, no bars or colours
    assert [line.split(":")[0] for line in lines] == [
        "stored a.txt",
        "stored sub/b.bin",
        "stored sub/deep/empty",
    ]
    assert "300000 bytes" in lines[1] and "\x1b" not in put.text + put.err and "━" not in put.err
    info = await store.info("sub/b.bin")
    assert info.metadata == {"run": "7"}

    out = tmp_path / "out"
    got, listed, one, streamed = jetstore_all(
        ("obj", "get", store.name, "--all", "-o", str(out), *url),
        ("obj", "ls", store.name, "--json", *url),
        ("obj", "info", store.name, "a.txt", "--json", *url),
        ("obj", "get", store.name, "sub/b.bin", "-o", "-", *url),
    )
    assert got.code == 0, got.err
    assert _tree(out) == _tree(source)  # digest verified, files complete
    assert "saved sub/b.bin -> " in got.text and "digest verified" in got.text
    assert sorted(o["name"] for o in json.loads(listed.out)) == [
        "a.txt",
        "sub/b.bin",
        "sub/deep/empty",
    ]
    fields = json.loads(one.out)
    assert (
        fields["size"] == 6 and fields["digest"].startswith("SHA-256=") and fields["link"] is None
    )
    assert streamed.code == 0 and streamed.out == (source / "sub" / "b.bin").read_bytes()

    here = tmp_path / "cwd"
    here.mkdir()
    single = jetstore("obj", "get", store.name, "sub/b.bin", *url, cwd=here)  # default: base name
    assert single.code == 0 and (here / "b.bin").read_bytes() == (source / "sub/b.bin").read_bytes()

    piped = jetstore(
        "obj", "put", store.name, "-", "--name", "from-stdin", "--json", *url, stdin=b"x" * 10
    )
    assert (
        json.loads(piped.out)["size"] == 10 and (await store.get_bytes("from-stdin")) == b"x" * 10
    )


async def test_link_watch_rm_cleanup_seal(
    store: objstore.ObjectStore, nats_server: jetstream.EmbeddedServer
) -> None:
    url = ("--server", nats_server.url)
    s = store.name
    await store.put("model-v1.bin", b"weights")
    linked = jetstore("obj", "link", s, "latest", "model-v1.bin", "--json", *url)
    assert json.loads(linked.out)["link"] == {"store": s, "name": "model-v1.bin"}

    watch = subprocess.Popen(  # noqa: ASYNC220 (starting it is quick; reading waits)
        cli_command("obj", "watch", s, "--json", "--count", "4", *url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    try:
        assert watch.stdout is not None
        seen = [json.loads(watch.stdout.readline()) for _ in range(2)]  # current objects: live
        assert sorted(o["name"] for o in seen) == ["latest", "model-v1.bin"]
        through_link = jetstore("obj", "get", s, "latest", "-o", "-", *url)
        assert through_link.out == b"weights"
        removed = jetstore("obj", "rm", s, "model-v1.bin", "-f", *url)
        assert removed.code == 0 and removed.text == "deleted model-v1.bin\n"
        await store.put("model-v2.bin", b"new weights")
        out, err = watch.communicate(timeout=30)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate()
    assert watch.returncode == 0, err
    changes = [json.loads(line) for line in out.splitlines()]
    assert [(c["name"], c["deleted"]) for c in changes] == [
        ("model-v1.bin", True),
        ("model-v2.bin", False),
    ]

    cleaned, sealed = jetstore_all(
        ("obj", "cleanup", s, "--older-than", "0", "--json", *url), ("obj", "seal", s, "-f", *url)
    )
    assert json.loads(cleaned.out) == {"removed": 0} and sealed.code == 0
    refused = jetstore("obj", "put", s, "-", "--name", "late", *url, stdin=b"late")
    assert refused.code == 1 and "UploadFailedError" in refused.err and "sealed" in refused.err


async def test_bad_input_and_missing_objects(
    store: objstore.ObjectStore, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    url = ("--server", nats_server.url)
    s = store.name
    (tmp_path / "f").write_bytes(b"1")
    results = jetstore_all(
        ("obj", "put", s, str(tmp_path / "missing"), *url),
        ("obj", "put", s, str(tmp_path / "f"), "--ttl", "0.5", *url),
        ("obj", "put", s, "-", *url),
        ("obj", "put", s, str(tmp_path), "--name", "x", *url),
        ("obj", "get", s, *url),
        ("obj", "get", s, "nope", *url),
        ("obj", "put", "no_such_store", str(tmp_path / "f"), *url),
    )
    codes = [(r.code, r.err.strip()) for r in results]
    assert [code for code, _ in codes] == [2, 2, 2, 2, 2, 1, 1], codes
    messages = [
        "does not exist",
        "--ttl",
        "--name",
        "--name",
        "--all",
        "ObjectNotFoundError",
        "StoreNotFoundError",
    ]
    for (_, err), message in zip(codes, messages, strict=True):
        assert message in err and len(err.splitlines()) == 1, err
    assert not [i async for i in store.list()]  # nothing stored


async def test_get_refuses_names_that_leave_the_directory(
    store: objstore.ObjectStore, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """A peer may store any name: ``../evil`` must not be written outside the directory."""
    await store.put("../evil", b"x")
    await store.put("good", b"y")
    out = tmp_path / "out"
    got = jetstore("obj", "get", store.name, "--all", "-o", str(out), "--server", nats_server.url)
    assert got.code == 1 and "not a safe relative path" in got.err
    assert (out / "good").read_bytes() == b"y"
    assert not (tmp_path / "evil").exists()


def _on_terminal(*args: str) -> tuple[int, str]:
    """Run ``jetstore ARGS`` under a pseudo-terminal: its exit code and the screen's text."""
    command = cli_command(*args)
    env = cli_env(TERM="xterm-256color", COLUMNS="120", LINES="30")
    child = pexpect.spawn(command[0], command[1:], env=env, cwd=str(ROOT), dimensions=(30, 120))
    try:
        child.expect(pexpect.EOF, timeout=60)
    finally:
        child.close()
    return child.exitstatus, _ANSI.sub("", child.before.decode(errors="replace"))


async def test_progress_bars_on_a_terminal_only(
    store: objstore.ObjectStore, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(24 * 1024 * 1024))
    (tmp_path / "small.txt").write_bytes(b"small")
    code, screen = _on_terminal(
        "obj", "put", store.name, str(big), str(tmp_path / "small.txt"), "-s", nats_server.url
    )
    assert code == 0, screen
    assert "━" in screen and "MB/s" in screen  # a bar with its transfer rate
    assert "total (2/2 files)" in screen and "25.2/25.2 MB" in screen  # the overall bar, full
    assert "stored big.bin: 25165824 bytes" in screen

    copy = tmp_path / "copy.bin"
    code, screen = _on_terminal(
        "obj", "get", store.name, "big.bin", "-o", str(copy), "-s", nats_server.url
    )
    assert code == 0 and "━" in screen and "25.2/25.2 MB" in screen, screen
    assert "saved big.bin" in screen and copy.read_bytes() == big.read_bytes()

    piped = jetstore("obj", "put", store.name, str(big), "--server", nats_server.url)
    assert piped.code == 0 and piped.text.startswith("stored big.bin: 25165824 bytes")
    assert "━" not in piped.err + piped.text and "\x1b" not in piped.err + piped.text
    quiet = jetstore(
        "obj", "put", store.name, str(tmp_path / "small.txt"), "-q", "--server", nats_server.url
    )
    assert quiet.code == 0 and quiet.out == b"" and quiet.err == ""


async def test_ctrl_c_during_an_upload_leaves_nothing(
    store: objstore.ObjectStore, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """Ctrl-C while an upload from a pipe is under way: exit 130, no object, no chunks."""
    fifo = tmp_path / "in"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)  # keeps the pipe open: the upload waits for more
    command = " ".join(
        [*cli_command("obj", "put", store.name, "-", "--name", "big"), "-s", nats_server.url]
    )
    child = pexpect.spawn(
        "bash",
        ["-c", f"exec {command} < {fifo}"],
        env=cli_env(TERM="xterm"),
        cwd=str(ROOT),
        dimensions=(24, 120),
    )
    try:
        feeder = threading.Thread(target=os.write, args=(writer, os.urandom(3 << 20)))
        feeder.start()
        child.expect(r"\d\.\d MB", timeout=30)  # the bar counts the bytes sent so far
        feeder.join()
        child.sendintr()
        # The input stays open until the upload has ended: an end of input racing the Ctrl-C
        # could complete the upload first (its commit then finishes, as documented).
        child.expect(pexpect.EOF, timeout=30)
    finally:
        if writer >= 0:
            os.close(writer)
        child.close()
    assert child.exitstatus == 130, child.before
    assert "jetstore: interrupted" in child.before.decode()
    with pytest.raises(objstore.ObjectNotFoundError):
        await store.info("big")
    deadline = time.monotonic() + 10
    while (await store.status()).stream_info.state.messages and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert (await store.status()).stream_info.state.messages == 0  # the chunks were purged
