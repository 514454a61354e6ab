"""Breaks of the ``jetstore`` command line found by a hostile review (helper-40), each run
as a subprocess against a real nats-server on a loopback port. Each failed before its fix;
the docstrings say what the user saw then."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pexpect
import pytest

import jetstream
import kvstore
from tests.cli.cli_helpers import ROOT, cli_command, cli_env, jetstore
from tests.conftest import BucketFactory, StoreFactory

pytestmark = pytest.mark.integration


def _close(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
    process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None and not stream.closed:
            with contextlib.suppress(BrokenPipeError):
                stream.close()


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
        _close(process)
        raise AssertionError("the watch did not print the bucket's entry")
    return process


def _no_traceback(err: str) -> None:
    assert "Traceback" not in err, err
    assert "(a bug? --debug shows where)" not in err, err


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


# --- kv put-many: bad input -------------------------------------------------------------------


async def test_put_many_non_utf8_file_is_a_usage_error(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """A JSON file saved as UTF-16 (or any non-UTF-8 bytes) is bad input: exit 2, one line,
    not a raw UnicodeDecodeError traceback with exit 1."""
    bucket = await make_bucket()
    source = tmp_path / "records.json"
    source.write_bytes('{"a": "b"}'.encode("utf-16"))
    run = jetstore("kv", "put-many", bucket.name, str(source), "-s", nats_server.url)
    _no_traceback(run.err)
    assert run.code == 2, run.err
    assert run.err.startswith("jetstore: "), run.err


async def test_put_many_non_utf8_stdin_is_a_usage_error(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer
) -> None:
    bucket = await make_bucket()
    run = jetstore(
        "kv",
        "put-many",
        bucket.name,
        "-",
        "--format",
        "jsonl",
        "-s",
        nats_server.url,
        stdin=b'{"key": "a", "value": "\xff"}\n',
    )
    _no_traceback(run.err)
    assert run.code == 2, run.err


async def test_put_many_deeply_nested_json_is_a_usage_error(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """Malformed input (nesting deeper than the parser handles) is a usage error, not a
    RecursionError traceback."""
    bucket = await make_bucket()
    source = tmp_path / "deep.json"
    source.write_text("[" * 100_000 + "]" * 100_000)
    run = jetstore("kv", "put-many", bucket.name, str(source), "-s", nats_server.url)
    _no_traceback(run.err)
    assert run.code == 2, run.err


async def test_put_many_value_over_max_payload_stores_nothing(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """docs/CLI.md: "Every record, key and TTL is checked before the first batch is sent
    (exit 2, nothing stored)". A record whose value cannot fit the server's max_payload is
    only found when its batch is sent: the earlier batches are already stored, yet the exit
    code is 2 ("nothing was sent (nothing written)")."""
    bucket = await make_bucket()
    source = tmp_path / "records.json"
    source.write_text(
        json.dumps(
            [
                {"key": "first", "value": "small"},
                {"key": "second", "value": "x" * (2 * 1024 * 1024)},  # > 1 MiB max_payload
            ]
        )
    )
    run = jetstore(
        "kv", "put-many", bucket.name, str(source), "--batch-size", "1", "-s", nats_server.url
    )
    assert run.code == 2, run.err
    with pytest.raises(kvstore.KeyNotFoundError):
        await bucket.get("first")  # exit 2 promises nothing was written


# --- signals: nothing half-written --------------------------------------------------------------


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
        _close(process)
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
        _close(process)
    leftovers = [p.name for p in target.iterdir() if p.name != "big"]
    assert leftovers == [], leftovers


# --- progress bars ----------------------------------------------------------------------------


def _on_terminal(*args: str) -> tuple[int | None, str]:
    command = cli_command(*args)
    child = pexpect.spawn(
        command[0], command[1:], env=cli_env(TERM="xterm"), cwd=str(ROOT), dimensions=(24, 120)
    )
    try:
        child.expect(pexpect.EOF, timeout=60)
    finally:
        child.close()
    return child.exitstatus, child.before.decode(errors="replace")


async def test_obj_put_on_a_terminal_with_brackets_in_the_name(
    make_store: StoreFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """Object names are arbitrary text; on a terminal the bar's label is parsed as rich
    markup, so a name like `weird[/x].txt` fails the upload with rich's MarkupError (exit 1).
    Piped, the same command works."""
    store = await make_store()
    source = tmp_path / "hello.txt"
    source.write_bytes(b"hello\n")
    code, screen = _on_terminal(
        "obj", "put", store.name, str(source), "--name", "weird[/x].txt", "-s", nats_server.url
    )
    assert "MarkupError" not in screen, screen
    assert code == 0, screen
    assert (await store.get_bytes("weird[/x].txt")) == b"hello\n"


async def test_obj_get_on_a_terminal_with_brackets_in_the_name(
    make_store: StoreFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    store = await make_store()
    await store.put("weird[/x].txt", b"hello\n")
    out = tmp_path / "got.txt"
    code, screen = _on_terminal(
        "obj", "get", store.name, "weird[/x].txt", "-o", str(out), "-s", nats_server.url
    )
    assert "MarkupError" not in screen, screen
    assert code == 0, screen
    assert out.read_bytes() == b"hello\n"


# --- a paused server ----------------------------------------------------------------------------


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
            _close(process)
    _no_traceback(err)
    assert "CancelledError" not in err, err
    assert process.returncode == 0, err
    assert took < 2 * 0.5 + 2, f"Ctrl-C took {took:.1f}s with --timeout 0.5"


# --- pipes --------------------------------------------------------------------------------------


async def test_put_many_piped_to_head_is_not_reported_as_failed(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """`jetstore kv put-many B big.jsonl | head -1`: every record is stored, then `head`
    closes the pipe; the verb prints "jetstore: error: [Errno 32] Broken pipe" and exits 1
    (the code for "the server refused or failed the operation"), so a `set -o pipefail`
    script believes the write failed. A closed stdout is no failure of the operation: exit
    quietly (0, or 141 as for SIGPIPE)."""
    bucket = await make_bucket()
    source = tmp_path / "many.jsonl"
    source.write_text(
        "".join(json.dumps({"key": f"key-{n:06d}", "value": "v"}) + "\n" for n in range(12_000))
    )  # its `key revision` lines are > 64 KiB: more than a pipe buffers
    process = subprocess.Popen(  # noqa: ASYNC220 (starting it is quick; reading waits)
        [*cli_command("kv", "put-many", bucket.name, str(source)), "-s", nats_server.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
        cwd=ROOT,
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()  # what `head -1` does, then it exits
    process.stdout.close()
    try:
        process.wait(timeout=60)
        err = process.stderr.read().decode()
    finally:
        _close(process)
    assert first.startswith(b"key-000000 "), first
    assert len([k async for k in bucket.keys()]) == 12_000  # everything was stored
    assert "Broken pipe" not in err, err
    assert process.returncode in (0, 141, -signal.SIGPIPE), (process.returncode, err)


# --- download paths -----------------------------------------------------------------------------


async def test_obj_get_output_with_trailing_slash_is_a_directory(
    make_store: StoreFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """`obj get S report.txt -o restore/` (restore/ not yet there): the trailing slash says
    a directory, like `cp x dir/`; the object is written as a *file* named `restore`
    instead. Expected: restore/report.txt (or a refusal), never a file called `restore`."""
    store = await make_store()
    await store.put("report.txt", b"data\n")
    run = jetstore(
        "obj",
        "get",
        store.name,
        "report.txt",
        "-o",
        f"{tmp_path / 'restore'}/",
        "-s",
        nats_server.url,
    )
    assert not (tmp_path / "restore").is_file(), run.text
    assert run.code == 0, run.text
    assert (tmp_path / "restore" / "report.txt").read_bytes() == b"data\n"


async def test_put_many_csv_takes_values_larger_than_csv_s_default_field_limit(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """csv stops at 128 KiB fields ("_csv.Error: field larger than field limit"), below the
    values a server takes (1 MiB here): such a CSV record is stored like a JSON one."""
    bucket = await make_bucket()
    source = tmp_path / "records.csv"
    big = "x" * (200 * 1024)
    source.write_text(f"key,value\nbig,{big}\nsmall,v\n")
    run = jetstore("kv", "put-many", bucket.name, str(source), "-s", nats_server.url)
    _no_traceback(run.err)
    assert run.code == 0, run.err
    assert (await bucket.get("big")).value == big.encode()


async def test_obj_put_with_an_empty_name_is_refused(
    make_store: StoreFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """`--name ''` stored the object under the file's own name, as if no name was given."""
    store = await make_store()
    source = tmp_path / "hello.txt"
    source.write_bytes(b"hello\n")
    run = jetstore("obj", "put", store.name, str(source), "--name", "", "-s", nats_server.url)
    assert run.code == 2, run.text
    assert [info.name async for info in store.list()] == []


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
        _close(process)
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
        _close(process)
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
