"""A verb reading its input from a closed stdin (- <&-, as under some daemons) fails as a
usage error (exit 2) naming stdin, not as an internal bug."""

from __future__ import annotations

import pytest

import jetstream

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
