"""Breaks of the ninth session's close, CLI and upload changes found by hostile review
helper-42 (each failed before its fix)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import jetstream

pytestmark = pytest.mark.integration


@pytest.fixture
def own_server() -> Iterator[jetstream.EmbeddedServer]:
    with jetstream.EmbeddedServer() as server:
        yield server


async def test_close_bounded_when_server_stalls_mid_close(
    own_server: jetstream.EmbeddedServer,
) -> None:
    """A subscription still holds messages its reader has not taken (as a fetch being
    iterated does), close() starts, then the server stops answering. close() took 10.5 s
    with timeout=0.5: the ping was answered, nats-py's drain started, swallowed the cancel
    that ended it and waited out its own 10 s flush. close() no longer drains."""
    js = await jetstream.connect(own_server.url, timeout=0.5, allow_reconnect=False)
    sub = await js.nc.subscribe("review9.unread")
    for i in range(3):
        await js.nc.publish("review9.unread", b"%d" % i)
    await js.nc.flush()  # the three messages are in the subscription's queue, unread
    closing = asyncio.create_task(js.close())
    await asyncio.sleep(0)  # close() is under way
    own_server.pause()
    try:
        started = time.monotonic()
        await asyncio.wait_for(asyncio.shield(closing), 30)
        took = time.monotonic() - started
    finally:
        own_server.resume()
    assert js.nc.is_closed
    assert took < 3.0, f"close() took {took:.1f} s with timeout=0.5"
    del sub


async def test_what_was_published_before_close_reaches_the_server(
    own_server: jetstream.EmbeddedServer,
) -> None:
    """close() flushes instead of draining: a publish just before it is still delivered."""
    js = await jetstream.connect(own_server.url)
    listener = await jetstream.connect(own_server.url)
    try:
        sub = await listener.nc.subscribe("review9.last")
        await listener.nc.flush()
        for i in range(1000):
            await js.nc.publish("review9.last", b"%d" % i)
        await js.close()
        got = [await sub.next_msg(timeout=5) for _ in range(1000)]
        assert [m.data for m in got][-1] == b"999"
    finally:
        await listener.close()


async def test_upload_many_takes_a_numpy_int_concurrency(
    nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """``concurrency=np.int64(2)`` (a value from a DataFrame or a config parsed by numpy) was
    taken before the change (``concurrency < 1``); check_count now refuses every int-like that
    is not a Python int with WrongTypeError. An int-like (``__index__``) is an int."""
    np = pytest.importorskip("numpy")
    import objstore
    from objstore._many import UploadItem, upload_many

    async with await jetstream.connect(nats_server.url) as js:
        await objstore.create_store(js, "review9np")
    path = tmp_path / "f"
    path.write_bytes(b"y" * 3000)
    connection = jetstream.ConnectionOptions.from_strings({"servers": nats_server.url})
    outcomes = await upload_many(
        connection, "review9np", [UploadItem(name="b", path=str(path))], concurrency=np.int64(2)
    )
    assert [(o.name, o.size, o.error) for o in outcomes] == [("b", 3000, None)]


def test_kv_get_with_stdout_closed_is_not_reported_as_a_bug(
    nats_server: jetstream.EmbeddedServer,
) -> None:
    """``jetstore kv get B k >&-`` (stdout closed, as a daemon or a cron job may run it) says
    "AttributeError: 'NoneType' object has no attribute 'buffer' (a bug? ...)". It should fail
    as a write to a closed stdout does (``cat >&-``: "write error: Bad file descriptor"),
    naming stdout, not as an internal bug."""
    import subprocess
    import sys

    from tests.cli.cli_helpers import cli_env

    async def setup() -> None:
        import kvstore

        async with await jetstream.connect(nats_server.url) as js:
            bucket = await kvstore.create_bucket(js, "review9closed")
            await bucket.put("k", b"hello")

    jetstream.run_sync(setup)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "jetstore",
            "kv",
            "get",
            "review9closed",
            "k",
            "--server",
            nats_server.url,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=cli_env(),
        timeout=60,
        check=False,
        close_fds=True,
        preexec_fn=lambda: __import__("os").close(1),
    )
    err = done.stderr.decode()
    assert "AttributeError" not in err and "a bug?" not in err, err
    assert done.returncode != 0, err


@pytest.mark.parametrize(
    "verb",
    [
        ("kv", "put-many", "review9stdin", "-", "--format", "jsonl"),
        ("obj", "put", "s", "-", "--name", "x"),
    ],
    ids=["kv-put-many", "obj-put"],
)
def test_reading_a_closed_stdin_is_a_usage_error(
    nats_server: jetstream.EmbeddedServer, verb: tuple[str, ...]
) -> None:
    """``- <&-`` (stdin closed, as under some daemons): "AttributeError: 'NoneType' object has
    no attribute 'buffer' (a bug? ...)" before; a usage error (exit 2) naming stdin now."""
    import subprocess
    import sys

    from tests.cli.cli_helpers import cli_env

    done = subprocess.run(
        [sys.executable, "-m", "jetstore", *verb, "--server", nats_server.url],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=cli_env(),
        timeout=60,
        check=False,
        preexec_fn=lambda: __import__("os").close(0),
    )
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "stdin" in err and "a bug?" not in err, err
