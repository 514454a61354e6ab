"""The watch with ordered-consumer windows of several sizes, side by side with nats-py's
``kv.watchall()`` in one run: wall time and each process's CPU (as ``watch_cpu``), with
updates written during the snapshot. It shows why a watch asks for up to 10,000 messages at a
time: fewer, larger pulls cost the server less and keep the watcher busy.

python -m benchmarks.watch_window --windows 500 10000 --keys 100000 --updates 20000 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio

import jetstream
from jetstream._consume import ordered

from .kv_watch import Writer
from .watch_cpu import (
    OURS,
    PEER,
    Drain,
    add_arguments,
    interleaved_runs,
    median_run,
    print_title,
    watchers,
)


def with_window(messages: int, drain: Drain) -> Drain:
    """``drain`` run with ordered consumers of ``messages`` at most."""

    async def drain_with_window(writer: Writer) -> None:
        default, ordered.WINDOW_MESSAGES = ordered.WINDOW_MESSAGES, messages
        try:
            await drain(writer)
        finally:
            ordered.WINDOW_MESSAGES = default

    return drain_with_window


async def main(args: argparse.Namespace) -> None:
    async with jetstream.EmbeddedServer() as server, watchers(server.url, args) as drains:
        ours = drains[OURS]
        variants = {f"{OURS}, window {n:,}": with_window(n, ours) for n in args.windows}
        variants[PEER] = drains[PEER]
        runs = await interleaved_runs(server, args, variants)
    print_title(args)
    print("| variant | wall | vs nats-py | watcher CPU | server CPU | writer CPU |")
    print("|---|---:|---:|---:|---:|---:|")
    peer_wall = median_run(runs[PEER]).wall
    for name, done in runs.items():
        run = median_run(done)
        print(
            f"| {name} | {run.wall:.2f} | {peer_wall / run.wall:.2f}x | {run.watcher:.2f}"
            f" | {run.server:.2f} | {run.writer:.2f} |"
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, nargs="+", default=[500, 10_000])
    return add_arguments(parser).parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
