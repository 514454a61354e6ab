"""``jetstore server`` (an embedded nats-server that stops cleanly on Ctrl-C), ``python -m
jetstore`` entry point and the message of an install without the ``cli`` extra."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

import jetstream
import kvstore

from .cli_helpers import ROOT, cli_command, cli_env, jetstore, jetstore_all

pytestmark = pytest.mark.integration


async def test_server_prints_its_url_serves_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    store = tmp_path / "store"
    args = cli_command("server", "--port", "0", "--store", str(store))
    child = pexpect.spawn(args[0], args[1:], env=cli_env(), cwd=str(ROOT), dimensions=(24, 120))
    try:
        child.expect(r"nats://127\.0\.0\.1:\d+", timeout=30)  # printed once ready
        url = child.after.decode()
        added = jetstore("kv", "add", "dev", "--server", url)  # a JetStream server: usable at once
        assert added.code == 0, added.err
        async with await jetstream.connect(url) as js:
            await (await kvstore.open_bucket(js, "dev")).put("k", b"v")
        child.sendintr()  # Ctrl-C: to the command and the nats-server it started
        child.expect("stopped", timeout=15)
        child.expect(pexpect.EOF, timeout=15)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert (store / "jetstream").is_dir()  # --store kept
    gone = jetstore("kv", "ls", "--server", url)
    assert gone.code == 3 and "connection refused" in gone.err


def test_server_json_announcement(tmp_path: Path) -> None:
    server = subprocess.Popen(
        cli_command("server", "--port", "0", "--json"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    try:
        assert server.stdout is not None
        announced = json.loads(server.stdout.readline())  # {"url", "port", "store"}, once ready
        assert announced["url"] == f"nats://127.0.0.1:{announced['port']}"
        store = Path(announced["store"])
        assert store.is_dir()
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=15)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert server.returncode == 0
    assert not store.exists()  # a temporary store is removed


def test_the_command_without_the_cli_extra_names_the_extra_in_one_line() -> None:
    """The console script is installed without the extra too: it must say what to install."""
    blocked = "import sys; sys.modules['rich'] = None; import jetstore; jetstore.main()"
    result = subprocess.run(
        [sys.executable, "-c", blocked], capture_output=True, text=True, env=cli_env(), cwd=ROOT
    )
    assert result.returncode == 2
    assert result.stderr == (
        "jetstore: error: the jetstore command needs the 'cli' extra (rich is not installed): "
        "pip install 'jetstore[cli]'\n"
    )


def test_credentials_and_timeouts_exit_3() -> None:
    """--user/--password reach the server; refused credentials and a server that never
    answers are connection errors (exit 3), within about --timeout, secrets never shown."""
    auth = ["--user", "alice", "--pass", "s3cret-pw"]
    with jetstream.EmbeddedServer(extra_args=auth) as server, socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # connections complete in the backlog; no INFO is ever sent
        silent_url = f"nats://127.0.0.1:{silent.getsockname()[1]}"
        ok, refused, in_url, mute = jetstore_all(
            ("kv", "ls", "--server", server.url, "--user", "alice", "--password", "s3cret-pw"),
            ("kv", "ls", "--server", server.url, "--user", "alice", "--password", "wrong-pw"),
            ("kv", "ls", "--server", f"nats://alice:wrong-pw@127.0.0.1:{server.port}"),
            ("kv", "ls", "--server", silent_url, "--timeout", "1"),
        )
    assert ok.code == 0, ok.err
    assert refused.code == 3 and refused.err.startswith("jetstore: error: AuthenticationError")
    assert in_url.code == 3 and "wrong-pw" not in in_url.err + refused.err
    assert mute.code == 3 and "ConnectionFailedError" in mute.err and "timed out" in mute.err
    # --timeout 1 bounds the wait; the process start (seconds under load) is in both runs
    assert mute.seconds - refused.seconds < 5
