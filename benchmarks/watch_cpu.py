"""Where the CPU of a watch run goes, per process: the watcher (this process), nats-server and
the writer, for ``kvstore`` ``watch()`` and nats-py's ``kv.watchall()`` with updates written
during the snapshot (the main benchmark's "during" rows). On a machine of two cores the three
share them: a run cannot end sooner than their CPU added up, halved. This tells which bound a
watch run hit: the watcher's own CPU, or the machine.

python -m benchmarks.watch_cpu --keys 100000 --updates 20000 --kind put --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import jetstream

from ._harness import processes_cpu
from .kv_watch import KINDS, Writer, watch_bucket, watch_ours, watch_peer


@dataclass
class Run:
    wall: float
    watcher: float
    server: float
    writer: float

    @property
    def total(self) -> float:
        return self.watcher + self.server + self.writer


async def one_run(
    url: str, server_pid: int, args: argparse.Namespace, drain: Callable[[Writer], Awaitable[None]]
) -> Run:
    writer = Writer(url, args.updates, args.kind)
    await writer.start()
    assert writer.pid is not None
    before = processes_cpu([server_pid]), processes_cpu([writer.pid]), time.process_time()
    started = time.perf_counter()
    try:
        await drain(writer)
        wall = time.perf_counter() - started
        return Run(
            wall,
            time.process_time() - before[2],
            processes_cpu([server_pid]) - before[0],
            processes_cpu([writer.pid]) - before[1],
        )
    finally:
        await writer.close()


@asynccontextmanager
async def watchers(
    url: str, args: argparse.Namespace
) -> AsyncIterator[dict[str, Callable[[Writer], Awaitable[None]]]]:
    entries = args.keys + args.updates
    async with watch_bucket(url, args.keys, args.kind, history=2) as (bucket, peer_kv):

        async def ours(writer: Writer) -> None:
            await watch_ours(bucket, writer, entries, 0)

        async def peer(writer: Writer) -> None:
            await watch_peer(peer_kv, writer, entries, 0)

        yield {"kvstore watch()": ours, "nats-py kv.watchall()": peer}


async def main(args: argparse.Namespace) -> None:
    async with jetstream.EmbeddedServer() as server, watchers(server.url, args) as variants:
        runs: dict[str, list[Run]] = {name: [] for name in variants}
        for round_ in range(args.rounds + 1):  # the first round warms up
            for name, drain in variants.items():
                run = await one_run(server.url, server.pid, args, drain)
                if round_:
                    runs[name].append(run)
    print(
        f"watch of {args.keys:,} keys + {args.updates:,} updates during the snapshot "
        f"({args.kind}), medians of {args.rounds} rounds, seconds"
    )
    print("| variant | wall | watcher CPU | server CPU | writer CPU | CPU / 2 cores |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, done in runs.items():
        median = {
            field: statistics.median(getattr(run, field) for run in done)
            for field in ("wall", "watcher", "server", "writer", "total")
        }
        print(
            f"| {name} | {median['wall']:.2f} | {median['watcher']:.2f} | {median['server']:.2f}"
            f" | {median['writer']:.2f} | {median['total'] / 2:.2f} |"
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=20_000)
    parser.add_argument("--kind", choices=KINDS, default="put")
    parser.add_argument("--rounds", type=int, default=5)
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
