"""What replication costs: the main benchmark's own scenarios (``put_many``, ``get_many``, single
compare-and-set writes, a watch's snapshot alone and with updates during it, object put and
get, consuming with acks) and creating consumers, on a 3-node cluster whose bucket, store and
streams keep 3 replicas (R3), against the same on a single server (R1), both on loopback with
their own store directories, interleaved round by round in one run.

The client talks to the cluster's first node, as a client given one URL does; each stream's
leader is wherever the cluster elected it (the report names it), and a request to a stream led
by another node crosses one more route hop.

Per operation (a key, a write, a MiB, a message): the wall time (median round / items), the
R3/R1 ratio of the medians, the client's CPU (this process, every thread) and the servers' CPU
(the three nodes together for R3; read from /proc, 10 ms ticks), both totals over the measured
rounds divided by the items. The watch's writer is a separate process: the servers' CPU
includes storing its updates, the client's does not. A consume round also publishes its
messages (untimed), so its CPU columns are left out.

python -m benchmarks.replication                      # 5 rounds, the defaults below
python -m benchmarks.replication --rounds 3 --watch-keys 5000 --object-mib 1 16
python -m benchmarks --replication-rounds 5 ...       # the same, within the main run
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from functools import partial

import jetstream
from jetstream.testing import EmbeddedCluster, EmbeddedServer

from . import consumer_groups, kv_atomic, kv_watch, objects
from ._harness import Scenario, Variant, machine, processes_cpu

R1 = "R1, one server"
R3 = "R3, 3-node cluster"


@dataclass(frozen=True)
class Settings:
    """The work per round; the defaults take about a minute on 2 cores."""

    rounds: int = 5
    put_sizes: tuple[int, ...] = (100, 1000)
    get_size: int = 100
    writes: int = 100
    """Single awaited writes (``update`` accepted): one write's round trip."""
    watch_keys: int = 20_000
    watch_updates: int = 5_000
    object_mib: tuple[int, ...] = (16,)
    messages: int = 1000
    """Messages per consume round; with one in flight, then with up to 1000."""


@dataclass
class Deployment:
    """Where one side runs: its URL, the replicas it asks for, its servers' pids."""

    label: str
    url: str
    replicas: int
    pids: list[int]
    leaders: dict[str, str] = field(default_factory=dict)


@dataclass
class Cpu:
    """CPU seconds spent during the measured (not warm-up) calls of each side."""

    client: dict[str, float] = field(default_factory=dict)
    server: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def wrap(self, side: Deployment, variant: Variant) -> Variant:
        """``variant``, adding its CPU (after its first, warm-up, call) to ``side``'s totals."""

        async def metered() -> None:
            client, server = time.process_time(), processes_cpu(side.pids)
            await variant()
            calls = self.calls[side.label] = self.calls.get(side.label, 0) + 1
            if calls > 1:
                used = time.process_time() - client
                self.client[side.label] = self.client.get(side.label, 0.0) + used
                burnt = processes_cpu(side.pids) - server
                self.server[side.label] = self.server.get(side.label, 0.0) + burnt

        return metered


@dataclass
class Result:
    scenario: Scenario
    cpu: Cpu | None
    """None: the rounds also do untimed work, so their CPU would mislead."""


def paired(one: Scenario, three: Scenario, sides: tuple[Deployment, Deployment]) -> Result:
    """One scenario of the R1 and R3 versions' baselines (ours), metered, with both
    clean-ups."""
    cpu = Cpu()
    afters = [s.after for s in (one, three) if s.after is not None]

    async def after() -> None:
        for clean_up in afters:
            await clean_up()

    variants = {
        side.label: cpu.wrap(side, s.variants[s.baseline])
        for side, s in zip(sides, (one, three), strict=True)
    }
    scenario = Scenario(
        one.name, one.items, variants, R1, after=after if afters else None, unit=one.unit
    )
    return Result(scenario, cpu)


async def measure(settings: Settings, sides: tuple[Deployment, Deployment]) -> list[Result]:
    """Every scenario on both sides, each over ``settings.rounds`` interleaved rounds."""
    results = await measure_kv(settings, sides)
    if settings.watch_keys:
        results += await measure_watch(settings, sides)
    results += await measure_objects(settings, sides)
    if settings.messages:
        results += await measure_consume(settings, sides)
    return results


async def measure_kv(settings: Settings, sides: tuple[Deployment, Deployment]) -> list[Result]:
    async with AsyncExitStack() as stack:
        c1, c3 = [
            await stack.enter_async_context(kv_atomic.clients(s.url, s.replicas)) for s in sides
        ]
        await note_leader(sides[1], c3.js, "KV_bench_atomic")
        results = [
            paired(kv_atomic.put_many_scenario(c1, n), kv_atomic.put_many_scenario(c3, n), sides)
            for n in settings.put_sizes
        ]
        if settings.get_size:
            records = {f"rec.k{i}": kv_atomic.VALUE for i in range(settings.get_size)}
            for c in (c1, c3):
                await c.bucket.put_many(records)
            get1, get3 = (kv_atomic.get_many_scenario(c, settings.get_size) for c in (c1, c3))
            results.append(paired(get1, get3, sides))
        if settings.writes:
            cas1, cas3 = (kv_atomic.cas_scenario(c, settings.writes) for c in (c1, c3))
            results.append(paired(cas1, cas3, sides))
        for result in results:
            await result.scenario.run(settings.rounds)
    return results


async def measure_watch(settings: Settings, sides: tuple[Deployment, Deployment]) -> list[Result]:
    """A snapshot of ``watch_keys`` keys alone, then with ``watch_updates`` written during it
    (by a writer process per side), on a bucket written by ``put_many``."""
    keys, kind = settings.watch_keys, "put_many"
    results = []
    async with AsyncExitStack() as stack:
        watched = []
        for side in sides:
            watched.append(
                await stack.enter_async_context(
                    kv_watch.watch_bucket(side.url, keys, kind, history=2, replicas=side.replicas)
                )
            )
        await note_leader(sides[1], watched[1][0].js, f"KV_{kv_watch.BUCKET}")
        for updates in dict.fromkeys((0, settings.watch_updates)):  # 0 alone once
            scenarios = []
            for side, (bucket, peer_kv) in zip(sides, watched, strict=True):
                writer = kv_watch.Writer(side.url, updates, kind)
                await writer.start()
                stack.push_async_callback(writer.close)
                scenarios.append(
                    kv_watch.watch_scenario(
                        bucket, peer_kv, writer, keys, updates, kind, during=True
                    )
                )
            result = paired(scenarios[0], scenarios[1], sides)
            if not updates:
                result.scenario.name = f"watch {keys:,} keys, the snapshot alone ({kind})"
            await result.scenario.run(settings.rounds)
            results.append(result)
    return results


async def measure_objects(settings: Settings, sides: tuple[Deployment, Deployment]) -> list[Result]:
    results = []
    async with AsyncExitStack() as stack:
        s1, s3 = [await stack.enter_async_context(objects.stores(s.url, s.replicas)) for s in sides]
        await note_leader(sides[1], s3.js, s3.store.stream)
        for mib in settings.object_mib:  # each put round purges the store: put first, then get
            putting = paired(objects.put_scenario(s1, mib), objects.put_scenario(s3, mib), sides)
            await putting.scenario.run(settings.rounds)
            get1, get3 = [await objects.get_scenario(s, mib) for s in (s1, s3)]
            getting = paired(get1, get3, sides)
            await getting.scenario.run(settings.rounds)
            results += [putting, getting]
    return results


async def measure_consume(settings: Settings, sides: tuple[Deployment, Deployment]) -> list[Result]:
    """``consumer_groups``' single consumer without work: each message handled and acked, one
    in flight (each waits for the previous ack) and up to 1000 in flight."""
    async with AsyncExitStack() as stack:
        benches = []
        for side in sides:
            js = await stack.enter_async_context(await jetstream.connect(side.url))
            bench = consumer_groups.Bench(side.url, js, settings.messages, 0.0, side.replicas)
            await bench.setup()
            stack.push_async_callback(bench.teardown)
            benches.append(bench)
        await note_leader(sides[1], benches[1].js, consumer_groups.SINGLE)
        results = []
        for in_flight in (1, 1000):
            timed: dict[str, Callable[[], Awaitable[float]]] = {
                side.label: partial(bench.single, in_flight)
                for side, bench in zip(sides, benches, strict=True)
            }
            scenario = Scenario(
                f"consume {settings.messages:,} msgs with acks, max_ack_pending={in_flight}",
                settings.messages,
                {label: consumer_groups.untimed for label in timed},
                R1,
                unit="msgs",
            )
            await consumer_groups.run_rounds(scenario, timed, settings.rounds)
            results.append(Result(scenario, None))
        one, three = (consumer_scenario(bench.js, CONSUMERS) for bench in benches)
        results.append(paired(one, three, sides))
        await results[-1].scenario.run(settings.rounds)
    return results


CONSUMERS = 10


def consumer_scenario(js: jetstream.JetStream, n: int) -> Scenario:
    """Create and delete ``n`` durable consumers, one after the other: changes to the
    cluster's metadata (on R3 each is a quorum write of the meta group, and a consumer of an
    R3 stream gets a raft group of its own)."""

    async def create_and_delete() -> None:
        for i in range(n):
            config = jetstream.ConsumerConfig(name=f"meta{i}", ack_policy="explicit")
            await js.create_consumer(consumer_groups.SINGLE, config)
            await js.delete_consumer(consumer_groups.SINGLE, f"meta{i}")

    return Scenario(
        f"create + delete {n} durable consumers",
        n,
        {"ours": create_and_delete},
        "ours",
        unit="consumers",
    )


async def note_leader(side: Deployment, js: jetstream.JetStream, stream: str) -> None:
    """Remember which node leads ``stream`` (the report names it: a leader on another node
    than the client's adds a route hop)."""
    cluster = (await js.stream_info(stream)).cluster or {}
    side.leaders[stream] = str(cluster.get("leader"))


def per_op(seconds: float) -> str:
    """``seconds`` in µs below a millisecond, else in ms ("n/a" for NaN)."""
    if math.isnan(seconds):
        return "n/a"
    micros = seconds * 1e6
    return f"{micros:.1f} µs" if micros < 999.95 else f"{micros / 1000:.2f} ms"


def table(results: list[Result], sides: tuple[Deployment, Deployment], rounds: int) -> str:
    one, three = (side.label for side in sides)
    lines = [
        f"| scenario | per op, {one} | per op, {three} | R3/R1 time "
        "| client CPU per op, R1 / R3 | servers' CPU per op, R1 / R3 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        s = result.scenario
        t1, t3 = (statistics.median(s.timings[label]) / s.items for label in (one, three))
        cells = [f"{s.name} (per {s.unit.rstrip('s')})", per_op(t1), per_op(t3), f"{t3 / t1:.2f}x"]
        if result.cpu is None:
            cells += ["-", "-"]
        else:
            done = rounds * s.items
            for spent in (result.cpu.client, result.cpu.server):
                cells.append(" / ".join(per_op(spent[label] / done) for label in (one, three)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run(settings: Settings) -> str:
    """Start one server and a 3-node cluster (temporary stores, loopback), measure, stop
    them; the markdown report (leaders and the table)."""
    with EmbeddedServer() as single, EmbeddedCluster(3, name="bench") as cluster:
        sides = (
            Deployment(R1, single.url, 1, [single.pid or 0]),
            Deployment(R3, cluster.nodes[0].url, 3, [node.pid or 0 for node in cluster.nodes]),
        )
        results = asyncio.run(measure(settings, sides))
    leaders = ", ".join(f"{stream} on {node}" for stream, node in sides[1].leaders.items())
    return (
        f"Medians of {settings.rounds} interleaved rounds after one warm-up; the client on "
        f"the cluster's node n0; R3 leaders: {leaders}.\n\n"
        f"{table(results, sides, settings.rounds)}\n"
    )


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The module's docstring as written, and each option's default."""


def main() -> None:
    defaults = Settings()
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.replication",
        description=__doc__,
        formatter_class=_HelpFormatter,
    )
    parser.add_argument(
        "--rounds", type=positive, default=defaults.rounds, help="measured rounds per scenario"
    )
    parser.add_argument(
        "--put-sizes", type=positive, nargs="*", default=list(defaults.put_sizes),
        help="keys per put_many",
    )  # fmt: skip
    parser.add_argument(
        "--get-size", type=count, default=defaults.get_size, help="keys per get_many; 0 skips"
    )
    parser.add_argument(
        "--writes", type=count, default=defaults.writes,
        help="single compare-and-set writes per round; 0 skips",
    )  # fmt: skip
    parser.add_argument(
        "--watch-keys", type=count, default=defaults.watch_keys, help="watch snapshot; 0 skips"
    )
    parser.add_argument(
        "--watch-updates", type=count, default=defaults.watch_updates,
        help="updates written during the snapshot",
    )  # fmt: skip
    parser.add_argument(
        "--object-mib", type=positive, nargs="*", default=list(defaults.object_mib),
        help="object sizes to put and get",
    )  # fmt: skip
    parser.add_argument(
        "--messages", type=count, default=defaults.messages, help="messages per consume; 0 skips"
    )
    args = parser.parse_args()
    settings = Settings(
        rounds=args.rounds,
        put_sizes=tuple(args.put_sizes),
        get_size=args.get_size,
        writes=args.writes,
        watch_keys=args.watch_keys,
        watch_updates=args.watch_updates,
        object_mib=tuple(args.object_mib),
        messages=args.messages,
    )
    command = "python -m benchmarks.replication " + " ".join(sys.argv[1:])
    print(f"Command: `{command.strip()}`  \nMachine: {machine('R1 vs R3')}, load {load()}  \n")
    print(run(settings))


def count(text: str) -> int:
    """An argparse type: a whole number, 0 or more."""
    number = int(text)
    if number < 0:
        raise argparse.ArgumentTypeError(f"{text} is below 0")
    return number


def positive(text: str) -> int:
    """An argparse type: a whole number, 1 or more."""
    number = count(text)
    if number == 0:
        raise argparse.ArgumentTypeError("0 is not allowed here")
    return number


def load() -> str:
    """The 1-minute load average now (the machine is shared), or "n/a"."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "n/a"


if __name__ == "__main__":
    main()
