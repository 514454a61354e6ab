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
from typing import ClassVar

import jetstream

from ._harness import processes_cpu
from .kv_watch import KINDS, Writer, watch_bucket, watch_ours, watch_peer

OURS = "kvstore watch()"
PEER = "nats-py kv.watchall()"
Drain = Callable[[Writer], Awaitable[None]]
"""Takes a watch's entries while the writer writes its updates."""


@dataclass
class Run:
    wall: float
    watcher: float
    server: float
    writer: float

    FIELDS: ClassVar[tuple[str, ...]] = ("wall", "watcher", "server", "writer")

    @property
    def total(self) -> float:
        return self.watcher + self.server + self.writer


async def one_run(url: str, server_pid: int, args: argparse.Namespace, drain: Drain) -> Run:
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
async def watchers(url: str, args: argparse.Namespace) -> AsyncIterator[dict[str, Drain]]:
    entries = args.keys + args.updates
    async with watch_bucket(url, args.keys, args.kind, history=2) as (bucket, peer_kv):

        async def ours(writer: Writer) -> None:
            await watch_ours(bucket, writer, entries, 0)

        async def peer(writer: Writer) -> None:
            await watch_peer(peer_kv, writer, entries, 0)

        yield {OURS: ours, PEER: peer}


async def interleaved_runs(
    server: jetstream.EmbeddedServer, args: argparse.Namespace, variants: dict[str, Drain]
) -> dict[str, list[Run]]:
    """``args.rounds`` runs of each variant, interleaved, after a warm-up round."""
    assert server.pid is not None
    runs: dict[str, list[Run]] = {name: [] for name in variants}
    for round_ in range(args.rounds + 1):  # the first round warms up
        for name, drain in variants.items():
            run = await one_run(server.url, server.pid, args, drain)
            if round_:
                runs[name].append(run)
    return runs


def median_run(runs: list[Run]) -> Run:
    """Each field's median over ``runs``."""
    return Run(*(statistics.median(getattr(run, field) for run in runs) for field in Run.FIELDS))


def print_title(args: argparse.Namespace) -> None:
    print(
        f"watch of {args.keys:,} keys + {args.updates:,} updates during the snapshot "
        f"({args.kind}), medians of {args.rounds} rounds, seconds"
    )


async def main(args: argparse.Namespace) -> None:
    async with jetstream.EmbeddedServer() as server, watchers(server.url, args) as variants:
        runs = await interleaved_runs(server, args, variants)
    print_title(args)
    print("| variant | wall | watcher CPU | server CPU | writer CPU | CPU / 2 cores |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, done in runs.items():
        run = median_run(done)
        print(
            f"| {name} | {run.wall:.2f} | {run.watcher:.2f} | {run.server:.2f}"
            f" | {run.writer:.2f} | {run.total / 2:.2f} |"
        )


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The scenario's options (shared with ``watch_window``)."""
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=20_000)
    parser.add_argument("--kind", choices=KINDS, default="put")
    parser.add_argument("--rounds", type=int, default=5)
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    return add_arguments(parser).parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
