"""A reader that closes stdout in the middle of one large write (``kv keys B --json | head -c
20``) ends the verb with exit 141, as it does for a run of small writes (docs/CLI.md, exit
codes). The kernel returns a short count for such a write, and Python's buffered stdout
dropped the rest without an error: exit 0, as if everything had been read. And a reader gone
after the first line ``kv put-many`` prints is no failure of the write (exit 0 or 141, never 1)."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

import jetstream
from tests.conftest import BucketFactory

from .cli_helpers import ROOT, cli_command, cli_env, close_process

pytestmark = pytest.mark.integration

_LARGER_THAN_A_PIPE = 4 * 65536


def _read_a_little_then_close(*args: str) -> tuple[int, bytes, str]:
    """What ``jetstore ARGS | head -c 20`` does: read 20 bytes (the verb is then inside its
    one large write, blocked on the full pipe), close the pipe, and wait for the verb."""
    process = subprocess.Popen(
        cli_command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(), cwd=ROOT
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        head = process.stdout.read(20)
        process.stdout.close()
        err = process.stderr.read().decode()
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        process.stderr.close()
    return process.returncode, head, err


@pytest.mark.parametrize(
    "verb",
    [("keys", "--json"), ("get", "big"), ("history", "big", "--json"), ("get", "big", "--json")],
)
async def test_a_reader_gone_in_the_middle_of_a_large_write_exits_141(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, verb: tuple[str, ...]
) -> None:
    bucket = await make_bucket()
    await bucket.put("big", b"v" * (_LARGER_THAN_A_PIPE // 2))  # JSON and base64: > 4 pipes
    await bucket.put_many({f"{n:04d}." + "k" * 2000: b"v" for n in range(150)})  # > 300 KB
    command, *rest = verb
    code, head, err = _read_a_little_then_close(
        "kv", command, bucket.name, *rest, "-s", nats_server.url
    )
    assert len(head) == 20
    assert code == 141, err
    assert err == ""


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
        close_process(process)
    assert first.startswith(b"key-000000 "), first
    assert len([k async for k in bucket.keys()]) == 12_000  # everything was stored
    assert "Broken pipe" not in err, err
    assert process.returncode in (0, 141, -signal.SIGPIPE), (process.returncode, err)
