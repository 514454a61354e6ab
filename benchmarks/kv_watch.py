"""Watching a bucket: an initial snapshot of many keys, then a stream of updates, vs nats-py's
``kv.watchall()``. Both watchers face the same writer, a separate process writing in batches
of 1000. Two kinds of bucket: written by ``put_many`` (every message keeps its
``Nats-Batch-*`` headers) and by plain puts (stored as nats-py's ``kv.put`` stores them: no
headers).

Two timings of the writer. *After the snapshot*: the updates start once the watcher has seen
every initial key, so that phase runs at the writer's pace for both watchers (the server
takes ~20,000-25,000 writes/s here, slower than either watcher reads). *During the snapshot*:
the updates start as soon as the watch exists (a watch opened on a busy bucket), so they wait
in the stream while the watcher reads and the whole run measures the watcher. That bucket
keeps two revisions per key, so an update never removes an initial value the watch has not
delivered yet (the server skips those) and every round sees every key.

Each scenario's name also reports each watcher's CPU (this process only: the server and the
writer run in others) per 100,000 events: on this shared 2-core machine wall times follow the
other jobs' load, while the CPU a watcher spends per event is its own."""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import nats
from nats.aio.msg import Msg
from nats.js.kv import KeyValue

import jetstream
import kvstore

from ._harness import Scenario

VALUE = b"v" * 100
BUCKET = "bench_watch"


KINDS = ("put_many", "put")
"""How the bucket is written: atomic batches, or plain puts."""


@asynccontextmanager
async def watch_bucket(
    url: str, keys: int, kind: str = "put_many", history: int = 1, replicas: int = 1
) -> AsyncIterator[tuple[kvstore.Bucket, KeyValue]]:
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.create_bucket(js, BUCKET, history=history, replicas=replicas)
        peer = await nats.connect(url)
        try:
            peer_kv = await peer.jetstream().key_value(BUCKET)
            for start in range(0, keys, 1000):
                await write(bucket, peer, kind, range(start, min(start + 1000, keys)), VALUE)
            yield bucket, peer_kv
        finally:
            await peer.close()
            await kvstore.delete_bucket(js, BUCKET)


async def write(
    bucket: kvstore.Bucket, peer: nats.NATS, kind: str, numbers: range, value: bytes
) -> None:
    """Keys ``k<n>`` for ``numbers``: one atomic batch, or plain puts sent together."""
    if kind == "put_many":
        await bucket.put_many({f"k{i}": value for i in numbers})
    else:
        await plain_puts(peer, [f"$KV.{bucket.name}.k{i}" for i in numbers], value)


async def plain_puts(nc: nats.NATS, subjects: list[str], value: bytes) -> None:
    """Plain puts, stored as nats-py's ``kv.put`` stores them (no headers), every one sent
    before the first acknowledgement is awaited: the server paces the writer, not a request
    future per put (``asyncio.gather`` of ``kv.put`` wrote ~20,000 keys/s here, slower than
    either watcher reads, so the benchmark timed the writer)."""
    inbox = nc.new_inbox()
    acked = asyncio.get_running_loop().create_future()
    left = len(subjects)
    errors: list[bytes] = []

    async def on_ack(msg: Msg) -> None:
        nonlocal left
        if b'"error"' in msg.data:
            errors.append(msg.data)
        left -= 1
        if left == 0:
            acked.set_result(None)

    sub = await nc.subscribe(f"{inbox}.*", cb=on_ack)
    try:
        for n, subject in enumerate(subjects):
            await nc.publish(subject, value, reply=f"{inbox}.{n}")
        await asyncio.wait_for(acked, 30)
    finally:
        await sub.unsubscribe()
    if errors:
        raise RuntimeError(f"{len(errors)} puts refused, first: {errors[0]!r}")


class Writer:
    """The update writer in its own process (see ``_writer``)."""

    def __init__(self, url: str, updates: int, kind: str = "put_many") -> None:
        self._args = [sys.executable, "-m", "benchmarks._writer", url, BUCKET, str(updates), kind]
        self._proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            *self._args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        assert self._proc.stdout is not None
        line = await self._proc.stdout.readline()  # connected and waiting for "go"
        assert line.strip() == b"ready", line

    @property
    def pid(self) -> int | None:
        """The writer process's pid, once started."""
        return None if self._proc is None else self._proc.pid

    async def go(self) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(b"go\n")
        await self._proc.stdin.drain()

    async def wait_done(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        line = await self._proc.stdout.readline()
        assert line.strip() == b"done", line

    async def close(self) -> None:
        if self._proc is not None and self._proc.stdin is not None:
            self._proc.stdin.close()
            await self._proc.wait()


async def watch_ours(bucket: kvstore.Bucket, writer: Writer, entries: int, go_at: int) -> None:
    """Take ``entries`` entries of ``bucket.watch()``; the writer goes after ``go_at``."""
    async with bucket.watch() as watcher:
        await _drain(watcher, entries, go_at, writer, lambda e: False)


async def watch_peer(peer_kv: KeyValue, writer: Writer, entries: int, go_at: int) -> None:
    """The same with nats-py's ``kv.watchall()`` (its end-of-snapshot None is not counted)."""
    watcher = await peer_kv.watchall()
    try:
        await _drain(watcher, entries, go_at, writer, lambda e: e is None)
    finally:
        await watcher.stop()


def watch_scenario(
    bucket: kvstore.Bucket,
    peer_kv: KeyValue,
    writer: Writer,
    keys: int,
    updates: int,
    kind: str = "put_many",
    during: bool = False,
) -> Scenario:
    """``during``: the writer starts when the watch exists, not after its snapshot (the
    bucket must keep 2 revisions per key, see the module's docstring)."""
    go_at = 0 if during else keys

    async def ours() -> None:
        await watch_ours(bucket, writer, keys + updates, go_at)

    async def peer() -> None:
        await watch_peer(peer_kv, writer, keys + updates, go_at)

    timing = "during" if during else "after"
    scenario = WatchScenario(
        f"watch {keys:,} keys + {updates:,} updates {timing} the snapshot ({kind})",
        keys + updates,
        {},
        baseline="kvstore watch()",
    )
    scenario.variants = {
        "kvstore watch()": scenario.timing_cpu("kvstore watch()", ours),
        "nats-py kv.watchall()": scenario.timing_cpu("nats-py kv.watchall()", peer),
    }
    return scenario


@dataclass
class WatchScenario(Scenario):
    """A watch scenario that also reports the watcher's CPU (this process's: the server and
    the writer are other processes) per 100,000 events, medians of the timed rounds."""

    cpu: dict[str, list[float]] = field(default_factory=dict)

    def timing_cpu(self, name: str, variant: Callable[[], Any]) -> Callable[[], Any]:
        async def timed() -> None:
            start = time.process_time()
            await variant()
            self.cpu.setdefault(name, []).append(time.process_time() - start)

        return timed

    def rows(self) -> list[tuple[str, str, float, float, float]]:
        per_100k = {  # the first call of each variant is the untimed warm-up round
            name: statistics.median(times[1:]) * 100_000 / self.items
            for name, times in self.cpu.items()
            if len(times) > 1
        }
        shown = ", ".join(f"{name} {cpu:.2f} s" for name, cpu in per_100k.items())
        label = f"{self.name}; client CPU per 100k events: {shown}" if shown else self.name
        return [(label, *row[1:]) for row in super().rows()]


async def _drain(
    watcher: AsyncIterator[object],
    entries: int,
    go_at: int,
    writer: Writer,
    is_marker: Callable[[object], bool],
) -> None:
    """Take ``entries`` entries; let the writer go once ``go_at`` of them were seen."""
    seen = 0
    if go_at == 0:
        await writer.go()
    async for entry in watcher:
        if is_marker(entry):
            continue
        seen += 1
        if seen == go_at:
            await writer.go()
        if seen == entries:
            break
    await writer.wait_done()
