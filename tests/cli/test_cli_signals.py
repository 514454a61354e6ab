"""SIGTERM (systemd, ``docker stop``, ``timeout``) ends a verb as Ctrl-C does: an upload leaves no
chunks, a download no part file, a watch exits 0, an import says what it stored; and Ctrl-C on
a watch whose server stopped answering ends it at once, cleanly."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import jetstream
import kvstore
from tests.cli.cli_helpers import (
    ROOT,
    assert_no_traceback,
    cli_command,
    cli_env,
    close_process,
)
from tests.conftest import BucketFactory, StoreFactory

pytestmark = pytest.mark.integration


def _running_watch(bucket: str, url: str, *options: str) -> subprocess.Popen[bytes]:
    """`jetstore kv watch BUCKET` once it has printed the bucket's one entry (revision 1)."""
    process = subprocess.Popen(
        [*cli_command("kv", "watch", bucket), "-s", url, *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
        cwd=ROOT,
    )
    assert process.stdout is not None
    if b"rev=1" not in process.stdout.readline():  # the watch is running
        close_process(process)
        raise AssertionError("the watch did not print the bucket's entry")
    return process


async def _wait_until(predicate: Callable[[], object], timeout: float = 20.0) -> None:
    """Poll a server-side condition (the CLI process gives no other signal of progress)."""
    import asyncio

    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if hasattr(result, "__await__"):
            result = await result  # type: ignore[misc]
        if result:
            return
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def test_sigterm_during_obj_put_leaves_no_chunks(
    make_store: StoreFactory, nats_server: jetstream.EmbeddedServer
) -> None:
    """`kill PID` (SIGTERM, what systemd, docker stop, timeout(1) send) during an upload must
    leave nothing behind, as Ctrl-C does: the process dies on the spot and the chunks it sent
    stay in the store (only `obj cleanup` a minute later removes them)."""
    store = await make_store()
    process = subprocess.Popen(  # noqa: ASYNC220 (starting it is quick; reading waits)
        [*cli_command("obj", "put", store.name, "-", "--name", "big"), "-s", nats_server.url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
        cwd=ROOT,
    )
    try:
        assert process.stdin is not None
        process.stdin.write(os.urandom(3 << 20))  # the upload waits for the rest of stdin
        process.stdin.flush()

        async def chunks_arrived() -> bool:
            return (await store.status()).size > 0

        await _wait_until(chunks_arrived)
        process.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.05)
        process.send_signal(signal.SIGTERM)  # again (an impatient user): the cleanup goes on
        process.wait(timeout=30)
    finally:
        close_process(process)
    assert [i.name async for i in store.list(include_deleted=True)] == []
    assert (await store.status()).size == 0, "chunks of the interrupted upload were left"


async def test_sigterm_during_obj_get_leaves_no_part_file(
    make_store: StoreFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """SIGTERM during a download leaves the hidden `.NAME.<hex>.part` temporary file in the
    user's directory (Ctrl-C removes it)."""
    store = await make_store()
    await store.put("big", os.urandom(48 << 20))
    target = tmp_path / "out"
    target.mkdir()
    process = subprocess.Popen(  # noqa: ASYNC220 (starting it is quick; reading waits)
        [*cli_command("obj", "get", store.name, "big", "-o", str(target)), "-s", nats_server.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
        cwd=ROOT,
    )
    try:
        await _wait_until(lambda: any(p.stat().st_size > 0 for p in target.iterdir()))
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    finally:
        close_process(process)
    leftovers = [p.name for p in target.iterdir() if p.name != "big"]
    assert leftovers == [], leftovers


async def test_sigterm_ends_a_watch_as_ctrl_c_does(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer
) -> None:
    """SIGTERM (systemd stopping a service running `kv watch`) is a watch's normal end, as
    Ctrl-C is: exit 0, nothing on stderr."""
    bucket = await make_bucket()
    await bucket.put("k", b"v")
    process = _running_watch(bucket.name, nats_server.url)
    try:
        assert process.stderr is not None
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        err = process.stderr.read().decode()
    finally:
        close_process(process)
    assert process.returncode == 0, err
    assert err == ""


async def test_sigterm_during_put_many_says_what_was_stored(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """A long import stopped midway (SIGTERM, or Ctrl-C) printed nothing of what it had
    stored, so the user could not tell where to resume: now the revisions of the stored
    batches are printed, and at most the batch in flight is unknown (never half of one)."""
    bucket = await make_bucket()
    source = tmp_path / "many.jsonl"
    source.write_text(
        "".join(json.dumps({"key": f"key-{n:06d}", "value": "v"}) + "\n" for n in range(20_000))
    )
    command = cli_command("kv", "put-many", bucket.name, str(source), "--batch-size", "10")
    process = subprocess.Popen(  # noqa: ASYNC220 (starting it is quick; reading waits)
        [*command, "-s", nats_server.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
        cwd=ROOT,
    )
    try:

        async def some_stored() -> bool:
            return (await bucket.status()).values >= 50

        await _wait_until(some_stored)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        close_process(process)
    assert process.returncode == 143, err
    assert "stopped;" in err.decode(), err
    reported = dict(line.split() for line in out.decode().splitlines())
    stored = {key: str(revision) for key, revision in await _revisions(bucket)}
    assert reported.items() <= stored.items()  # every reported key is stored as reported
    assert len(stored) - len(reported) in (0, 10)  # at most the batch in flight, whole
    assert len(stored) < 20_000, "the import finished before the signal: nothing tested"


async def _revisions(bucket: kvstore.Bucket) -> list[tuple[str, int]]:
    keys = [key async for key in bucket.keys()]
    snapshot = await bucket.get_many(keys)
    return [(key, entry.revision) for key, entry in snapshot.items()]


async def test_ctrl_c_on_kv_watch_with_a_paused_server_is_quick_and_clean() -> None:
    """The server stops answering (SIGSTOP: a hung host) while `kv watch` runs; the user
    presses Ctrl-C. Documented: Ctrl-C ends a watch, exit 0, a silent server is given up
    after --timeout. Actual: it hangs ~10 s more (whatever --timeout) and then prints a raw
    nats-py traceback ("_GatheringFuture exception was never retrieved ... CancelledError")
    on stderr. The same tail follows a failed `obj put` against a paused server."""
    async with jetstream.EmbeddedServer() as server:
        js = await jetstream.connect([server.url])
        bucket = await kvstore.create_bucket(js, "watched")
        await bucket.put("k", b"v")
        await js.close()
        process = _running_watch("watched", server.url, "--timeout", "0.5")
        try:
            assert process.stderr is not None
            server.pause()
            started = time.monotonic()
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            finally:
                server.resume()
            took = time.monotonic() - started
            err = process.stderr.read().decode()
        finally:
            close_process(process)
    assert_no_traceback(err)
    assert "CancelledError" not in err, err
    assert process.returncode == 0, err
    assert took < 2 * 0.5 + 2, f"Ctrl-C took {took:.1f}s with --timeout 0.5"
