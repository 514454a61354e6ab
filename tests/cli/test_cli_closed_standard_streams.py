"""A verb run with stdin or stdout closed from the start (``<&-``, ``>&-``, as under some daemons
and cron jobs) fails naming the stream: reading a closed stdin is a usage error (exit 2), writing
to a closed stdout fails as such a write does; neither is reported as an internal bug."""

from __future__ import annotations

import pytest

import jetstream
from jetstream._options import run_sync

pytestmark = pytest.mark.integration


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

    run_sync(setup)
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
