"""Replay a history printed by a failing model test::

    .venv/bin/python -m tests.model.replay '<history json>' [--times N]

Starts its own nats-server (temporary store), runs the history ``N`` times (interleavings
vary between runs) and prints every broken promise. Exit status 1 if any run broke one."""

from __future__ import annotations

import argparse
import asyncio
import sys

import jetstream

from .check import report, run_and_check
from .history import History


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.model.replay")
    parser.add_argument("history", help="the history's JSON, as printed by the failing test")
    parser.add_argument("--times", type=int, default=1, help="runs of the history (default 1)")
    options = parser.parse_args(argv)
    history = History.from_json(options.history)
    broken = 0
    with jetstream.EmbeddedServer() as server:
        for run in range(1, options.times + 1):
            violations, calls, faults = asyncio.run(run_and_check(server, history))
            if violations:
                broken += 1
                print(f"run {run}: BROKEN\n{report(history, violations, calls, faults)}\n")
            else:
                print(f"run {run}: ok ({len(calls)} calls, faults: {faults or 'none'})")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
