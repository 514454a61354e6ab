"""A write verb reads no more of its input than the bucket can take: ``kv put``, ``create``
and ``update`` read a value from a file or stdin up to the bucket's limit (its
``max_value_size``, or the server's ``max_payload``) plus one byte, then refuse it (exit 2,
nothing written); ``kv put-many`` bounds each record (by what a value of the server's
``max_payload`` can need), not the whole input. Before, the whole
input was read first (``--file /dev/zero``: 10 GB in 20 s), and a pipe's writer had to close
it before a too large value was refused. Each verb runs with its address space capped at
1 GiB, so an unbounded read fails instead of taking the machine's memory."""

from __future__ import annotations

import contextlib
import json
import resource
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import jetstream
import kvstore
from tests.conftest import BucketFactory

from .cli_helpers import ROOT, Run, cli_command, cli_env, jetstore

pytestmark = pytest.mark.integration

_MEMORY_CAP = 1 << 30
_ONE_KIB = 1024
_RECORD_BOUND = 6 * (1 << 20) + 64 * _ONE_KIB  # the session server's max_payload: 1 MiB


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (_MEMORY_CAP, _MEMORY_CAP))


def _run(*args: str, stdin: object = subprocess.DEVNULL) -> Run:
    """``jetstore ARGS`` with at most 1 GiB of address space."""
    done = subprocess.run(
        cli_command(*args),
        stdin=stdin,  # type: ignore[arg-type]
        capture_output=True,
        env=cli_env(),
        cwd=ROOT,
        timeout=60,
        preexec_fn=_capped,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr.decode(), 0.0)


@contextlib.contextmanager
def _fed(*args: str, data: bytes) -> Iterator[subprocess.Popen[bytes]]:
    """``jetstore ARGS`` reading a pipe that holds ``data`` and is never closed by its writer
    (a producer still running)."""
    process = subprocess.Popen(
        cli_command(*args),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
        cwd=ROOT,
        preexec_fn=_capped,
    )
    assert process.stdin is not None
    try:
        process.stdin.write(data)
        process.stdin.flush()
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            with contextlib.suppress(BrokenPipeError):
                stream.close()  # type: ignore[union-attr]


def _ended(process: subprocess.Popen[bytes]) -> tuple[int, str]:
    """The exit code and stderr of a process that ends with its stdin still open."""
    assert process.stderr is not None
    err = process.stderr.read().decode()  # EOF once the process has exited
    return process.wait(timeout=30), err


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


async def _empty(bucket: kvstore.Bucket) -> bool:
    return [key async for key in bucket.keys()] == []


_VALUE_VERBS = [("put",), ("create",), ("update", "--revision", "0")]


@pytest.mark.parametrize("verb", _VALUE_VERBS, ids=lambda verb: verb[0])
@pytest.mark.parametrize("limited", [True, False], ids=["max_value_size", "max_payload"])
async def test_a_value_from_dev_zero_is_refused_at_the_limit(
    make_bucket: BucketFactory,
    nats_server: jetstream.EmbeddedServer,
    verb: tuple[str, ...],
    limited: bool,
) -> None:
    bucket = await make_bucket(max_value_size=_ONE_KIB if limited else -1)
    command, *options = verb
    url = ("-s", nats_server.url)
    from_file = _run("kv", command, bucket.name, "k", *options, "--file", "/dev/zero", *url)
    with open("/dev/zero", "rb") as zero:  # noqa: ASYNC230 (a device: opening is instant)
        from_stdin = _run("kv", command, bucket.name, "k", *options, *url, stdin=zero)
    limit, reason = (
        (_ONE_KIB, f"the max_value_size of bucket {bucket.name!r}")
        if limited
        else (1 << 20, "the server's max_payload")
    )
    for run, where in [(from_file, "'/dev/zero'"), (from_stdin, "stdin")]:
        assert run.code == 2, run.err
        assert _one_error_line(run.err) == (
            f"jetstore: error: ValueTooLargeError: the value in {where} is larger than "
            f"{limit} bytes, {reason}; nothing was written"
        )
    assert await _empty(bucket)


async def test_a_pipe_is_refused_without_waiting_for_its_end(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer
) -> None:
    """The limit plus one byte decides: the writer need not finish (or ever end)."""
    bucket = await make_bucket(max_value_size=_ONE_KIB)
    with _fed("kv", "put", bucket.name, "k", "-s", nats_server.url, data=b"x" * 1025) as put:
        code, err = _ended(put)
    assert code == 2, err
    assert "larger than 1024 bytes" in _one_error_line(err)
    assert await _empty(bucket)


async def test_a_value_at_the_limit_is_stored(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    bucket = await make_bucket(max_value_size=_ONE_KIB)
    source = tmp_path / "value"
    source.write_bytes(b"v" * _ONE_KIB)
    run = jetstore("kv", "put", bucket.name, "k", "--file", str(source), "-s", nats_server.url)
    assert run.code == 0, run.err
    assert (await bucket.get("k")).value == b"v" * _ONE_KIB


async def test_a_value_argument_is_stored_as_the_shell_passed_its_bytes(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer
) -> None:
    """A value that is not UTF-8 (``$'\\xff'``) failed with a UnicodeEncodeError traceback."""
    bucket = await make_bucket()
    done = subprocess.run(  # noqa: ASYNC221 (the test waits for the verb)
        [*cli_command("kv", "put", bucket.name, "k"), b"\xff\xfe", "-s", nats_server.url],
        capture_output=True,
        env=cli_env(),
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (await bucket.get("k")).value == b"\xff\xfe"


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv"])
async def test_put_many_of_dev_zero_is_refused_at_once(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, fmt: str
) -> None:
    bucket = await make_bucket(max_value_size=_ONE_KIB)
    run = _run("kv", "put-many", bucket.name, "/dev/zero", "--format", fmt, "-s", nats_server.url)
    assert run.code == 2, run.err
    assert _one_error_line(run.err).startswith("jetstore: usage: ")
    assert await _empty(bucket)


@pytest.mark.parametrize(
    ("fmt", "start"),
    [
        ("jsonl", b'{"key": "a", "value": "'),
        ("json", b'[{"key": "a", "value": "'),
        ("json", b'{"a": "'),
        ("csv", b'key,value\na,"'),
    ],
)
async def test_put_many_refuses_an_endless_record_without_waiting_for_the_end(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, fmt: str, start: bytes
) -> None:
    """A record that goes on past what a value of the server's max_payload could need (six
    characters a byte, plus 64 KiB for its key and fields) is refused there."""
    bucket = await make_bucket()
    endless = start + b"x" * _RECORD_BOUND
    args = ("kv", "put-many", bucket.name, "-", "--format", fmt, "-s", nats_server.url)
    with _fed(*args, data=endless) as put_many:
        code, err = _ended(put_many)
    assert code == 2, err
    line = _one_error_line(err)
    assert f"a record longer than {_RECORD_BOUND} characters" in line, line
    assert "nothing was stored" in line
    assert await _empty(bucket)


async def test_put_many_bounds_each_record_not_the_whole_input(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    bucket = await make_bucket()
    records = {f"k{n:04d}": "v" * 4 * _ONE_KIB for n in range(1700)}
    source = tmp_path / "records.json"
    source.write_text(json.dumps(records))
    assert source.stat().st_size > _RECORD_BOUND
    run = jetstore("kv", "put-many", bucket.name, str(source), "-q", "-s", nats_server.url)
    assert run.code == 0, run.err
    assert len([key async for key in bucket.keys()]) == len(records)
