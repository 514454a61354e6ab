"""Timing and reporting: interleaved rounds, medians, ratios, a markdown table."""

from __future__ import annotations

import asyncio
import math
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from jetstream.testing import find_server_binary

Variant = Callable[[], Awaitable[None]]


def processes_cpu(pids: Iterable[int]) -> float:
    """User + system CPU seconds of these processes so far, from ``/proc/<pid>/stat`` (10 ms
    ticks); NaN where /proc is missing (another system, or a process that is gone)."""
    ticks = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            return math.nan
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass
class Scenario:
    """One comparison: variants doing the same work (``items`` keys each round)."""

    name: str
    items: int
    variants: dict[str, Variant]
    baseline: str
    """The variant the others are compared with (ours)."""
    after: Variant | None = None
    """Untimed clean-up after each variant call (e.g. deleting what a put stored)."""
    unit: str = "keys"
    timings: dict[str, list[float]] = field(default_factory=dict)

    async def run(self, rounds: int) -> None:
        """Run every variant once per round, in rotating order, after one warm-up round."""
        names = list(self.variants)
        for round_no in range(rounds + 1):
            order = names[round_no % len(names) :] + names[: round_no % len(names)]
            for name in order:
                start = time.perf_counter()
                await self.variants[name]()
                elapsed = time.perf_counter() - start
                if round_no:  # round 0 warms up connections, buckets and caches
                    self.timings.setdefault(name, []).append(elapsed)
                if self.after is not None:
                    await self.after()

    def rows(self) -> list[tuple[str, str, float, float, float]]:
        """(scenario, variant, median ms, items/s, baseline speed / variant speed)."""
        medians = {name: statistics.median(times) for name, times in self.timings.items()}
        ours = medians[self.baseline]
        return [
            (self.name, name, median * 1e3, self.items / median, median / ours)
            for name, median in medians.items()
        ]


def table(scenarios: list[Scenario]) -> str:
    lines = [
        "| scenario | variant | median ms | rate | ours is N x faster |",
        "|---|---|---:|---:|---:|",
    ]
    for scenario in scenarios:
        for name, variant, ms, rate, ratio in scenario.rows():
            mark = "(ours)" if variant == scenario.baseline else f"{ratio:.2f}x"
            lines.append(
                f"| {name} | {variant} | {ms:.2f} | {rate:,.0f} {scenario.unit}/s | {mark} |"
            )
    return "\n".join(lines)


def machine(replication: str = "R1") -> str:
    server = subprocess.run(
        [str(find_server_binary()), "--version"], capture_output=True, text=True
    ).stdout.strip()
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {server}, file storage, {replication}, loopback"
    )


def run_all(scenarios: list[Scenario], rounds: int) -> None:
    async def main() -> None:
        for scenario in scenarios:
            await scenario.run(rounds)

    asyncio.run(main())
