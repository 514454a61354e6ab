"""Ctrl-C ends every verb with exit 130 and one line, ``jetstore: interrupted``, wherever it
lands (docs/CLI.md, exit codes): at a question, while the value is read from stdin, while
connecting, or while the connection closes after the work is done. Each point is reached
deterministically: the test waits for a sign of it (a prompt, stdin drained, a socket
accepted, the verb's output) before sending SIGINT to the real process."""

from __future__ import annotations

import contextlib
import fcntl
import signal
import socket
import struct
import subprocess
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

import jetstream
import kvstore
from tests.conftest import BucketFactory

from .cli_helpers import ROOT, cli_command, cli_env

pytestmark = pytest.mark.integration


@contextlib.contextmanager
def _started(*args: str) -> Iterator[subprocess.Popen[bytes]]:
    """``jetstore ARGS`` with stdin, stdout and stderr as pipes; killed if still running."""
    process = subprocess.Popen(
        cli_command(*args),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
        cwd=ROOT,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def _unread(pipe: int) -> int:
    """Bytes written to a pipe that its reader has not read yet."""
    return int(struct.unpack("i", fcntl.ioctl(pipe, termios.FIONREAD, b"\0" * 4))[0])


def _interrupted(process: subprocess.Popen[bytes]) -> tuple[int, str]:
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    return process.returncode, err.decode()


def _wait_for_drained(process: subprocess.Popen[bytes]) -> None:
    """Block until the process has read what was written to its stdin (it is reading it, and
    waits for more: the pipe stays open)."""
    assert process.stdin is not None
    process.stdin.write(b"the first part of the value")
    process.stdin.flush()
    fd = process.stdin.fileno()
    while _unread(fd) and process.poll() is None:
        time.sleep(0.005)  # polls the pipe: the only sign that stdin is being read
    assert process.poll() is None, "the verb ended before reading all of stdin"


@pytest.mark.parametrize(
    "verb",
    [
        ("kv", "put", "{bucket}", "k"),
        ("kv", "put", "{bucket}", "k", "-"),
        ("kv", "create", "{bucket}", "k"),
        ("kv", "update", "{bucket}", "k", "--revision", "1"),
        ("kv", "put-many", "{bucket}", "-", "--format", "jsonl"),
    ],
    ids=["put", "put -", "create", "update", "put-many"],
)
async def test_ctrl_c_while_the_value_is_read_from_stdin(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, verb: tuple[str, ...]
) -> None:
    """Before: exit 1 and "jetstore: aborted" (click's Abort), as for a question answered no."""
    bucket = await make_bucket()
    args = [part.format(bucket=bucket.name) for part in verb]
    with _started(*args, "-s", nats_server.url) as process:
        _wait_for_drained(process)
        code, err = _interrupted(process)
    assert code == 130, err
    assert err.strip().splitlines() == ["jetstore: interrupted"], err
    assert [key async for key in bucket.keys()] == []


async def test_ctrl_c_at_a_question_on_a_terminal(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer
) -> None:
    """`kv rm B` asks before deleting; Ctrl-C at the question is an interruption (130), not a
    no (1: "aborted")."""
    bucket = await make_bucket()
    command = cli_command("kv", "rm", bucket.name, "-s", nats_server.url)
    child = pexpect.spawn(command[0], command[1:], env=cli_env(TERM="xterm"), cwd=str(ROOT))
    try:
        child.expect(r"delete bucket .*\?", timeout=30)
        child.sendintr()
        child.expect(pexpect.EOF, timeout=30)
    finally:
        child.close()
    assert child.exitstatus == 130, child.before
    assert "jetstore: interrupted" in child.before.decode()
    assert (await kvstore.open_bucket(bucket.js, bucket.name)).name == bucket.name  # kept


def test_ctrl_c_while_connecting_to_a_silent_server() -> None:
    """A server that accepts the TCP connection and never says a word (a hung host)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"nats://127.0.0.1:{listener.getsockname()[1]}"
        with _started("kv", "ls", "-s", url, "--timeout", "60") as process:
            connection, _ = listener.accept()  # the client's socket is connected
            with connection:
                code, err = _interrupted(process)
    assert code == 130, err
    assert err.strip().splitlines() == ["jetstore: interrupted"], err


async def test_ctrl_c_racing_the_end_of_put_many_prints_no_traceback(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """The revisions are printed, then the connection closes: Ctrl-C then cancelled nats-py's
    closing flush, and its late PONG killed nats-py's reading task with a logged
    ``InvalidStateError`` traceback (most runs), even without --debug."""
    bucket = await make_bucket()
    source = tmp_path / "records.jsonl"
    source.write_text("".join(f'{{"key": "k{n}", "value": "v"}}\n' for n in range(20)))
    for _ in range(6):
        with _started("kv", "put-many", bucket.name, str(source), "-s", nats_server.url) as run:
            assert run.stdout is not None
            assert run.stdout.readline().startswith(b"k0 ")  # stored; closing now
            code, err = _interrupted(run)
        assert "Traceback" not in err and "encountered error" not in err, err
        assert code in (0, 130, -signal.SIGINT), err  # -2: SIGINT during interpreter exit
    assert len([key async for key in bucket.keys()]) == 20
