"""The watch with ordered-consumer windows of several sizes, side by side with nats-py's
``kv.watchall()`` in one run: wall time and each process's CPU (as ``watch_cpu``), with
updates written during the snapshot. It shows why a watch asks for up to 10,000 messages at a
time: fewer, larger pulls cost the server less and keep the watcher busy.

python -m benchmarks.watch_window --windows 500 10000 --keys 100000 --updates 20000 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from collections.abc import Awaitable, Callable

import jetstream
from jetstream._consume import ordered

from .kv_watch import KINDS, Writer, watch_bucket, watch_ours, watch_peer
from .watch_cpu import Run, one_run

PEER = "nats-py kv.watchall()"


def with_window(
    messages: int, drain: Callable[[Writer], Awaitable[None]]
) -> Callable[[Writer], Awaitable[None]]:
    """``drain`` run with ordered consumers of ``messages`` at most."""

    async def drain_with_window(writer: Writer) -> None:
        default, ordered.WINDOW_MESSAGES = ordered.WINDOW_MESSAGES, messages
        try:
            await drain(writer)
        finally:
            ordered.WINDOW_MESSAGES = default

    return drain_with_window


async def main(args: argparse.Namespace) -> None:
    entries = args.keys + args.updates
    async with (
        jetstream.EmbeddedServer() as server,
        watch_bucket(server.url, args.keys, args.kind, history=2) as (bucket, peer_kv),
    ):

        async def ours(writer: Writer) -> None:
            await watch_ours(bucket, writer, entries, 0)

        async def peer(writer: Writer) -> None:
            await watch_peer(peer_kv, writer, entries, 0)

        variants = {f"kvstore watch(), window {n:,}": with_window(n, ours) for n in args.windows}
        variants[PEER] = peer
        runs: dict[str, list[Run]] = {name: [] for name in variants}
        for round_ in range(args.rounds + 1):  # the first round warms up
            for name, drain in variants.items():
                run = await one_run(server.url, server.pid, args, drain)
                if round_:
                    runs[name].append(run)
    report(args, runs)


def report(args: argparse.Namespace, runs: dict[str, list[Run]]) -> None:
    print(
        f"watch of {args.keys:,} keys + {args.updates:,} updates during the snapshot "
        f"({args.kind}), medians of {args.rounds} rounds, seconds"
    )
    print("| variant | wall | vs nats-py | watcher CPU | server CPU | writer CPU |")
    print("|---|---:|---:|---:|---:|---:|")
    peer_wall = statistics.median(run.wall for run in runs[PEER])
    for name, done in runs.items():
        wall, watcher, server, writer = (
            statistics.median(getattr(run, field) for run in done)
            for field in ("wall", "watcher", "server", "writer")
        )
        print(
            f"| {name} | {wall:.2f} | {peer_wall / wall:.2f}x | {watcher:.2f} | {server:.2f}"
            f" | {writer:.2f} |"
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, nargs="+", default=[500, 10_000])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=20_000)
    parser.add_argument("--kind", choices=KINDS, default="put")
    parser.add_argument("--rounds", type=int, default=5)
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
