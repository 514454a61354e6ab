"""A lock holder in its own process, for the lock tests (kill -9, SIGSTOP, several holders).

python lock_process.py URL BUCKET LOCK journal PATH ROUNDS
    ROUNDS times: take the lock, append "in <token> <pid>" and then "out <token> <pid>" to
    the shared journal PATH (O_APPEND: each line lands whole), release.
python lock_process.py URL BUCKET LOCK hold
    take the lock, print "held <token>", then for each stdin line "write <value>" do a
    fenced put of key "data" and print "stored <revision>" or "lost held=<held>".
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import sys

import jetstream
import kvstore

TTL = 3
ROOT = pathlib.Path(__file__).parents[2]


async def start(url: str, bucket: str, name: str, *args: str) -> asyncio.subprocess.Process:
    """This program in a child process (stdin and stdout piped)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        url,
        bucket,
        name,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


async def said(process: asyncio.subprocess.Process) -> str:
    """The child's next line (its answer to a command, or "held <token>")."""
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 60)
    return line.decode().strip()


def tell(process: asyncio.subprocess.Process, line: str) -> None:
    assert process.stdin is not None
    process.stdin.write(line.encode() + b"\n")


async def journal(bucket: kvstore.Bucket, name: str, path: str, rounds: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        for _ in range(rounds):
            async with bucket.lock(name, ttl=TTL, timeout=60) as lease:
                os.write(fd, f"in {lease.token} {os.getpid()}\n".encode())
                await asyncio.sleep(0.02)  # work while holding: another holder would show
                os.write(fd, f"out {lease.token} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


async def hold(bucket: kvstore.Bucket, name: str) -> None:
    loop = asyncio.get_running_loop()
    async with bucket.lock(name, ttl=TTL, timeout=60) as lease:
        _say(f"held {lease.token}")
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            command, _, value = line.strip().partition(" ")
            assert command == "write", line
            try:
                revision = await bucket.put("data", value.encode(), fence=lease)
            except kvstore.LeaseLostError:
                _say(f"lost held={lease.held}")
            else:
                _say(f"stored {revision}")


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main(url: str, bucket_name: str, name: str, mode: str, *rest: str) -> None:
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.open_bucket(js, bucket_name)
        if mode == "journal":
            await journal(bucket, name, rest[0], int(rest[1]))
        else:
            await hold(bucket, name)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
