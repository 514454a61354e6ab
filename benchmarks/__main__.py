"""Run the benchmarks against an embedded nats-server and print (or write) the result table.

python -m benchmarks                     # all scenarios, 15 rounds
python -m benchmarks --rounds 3 --sizes 10 100
python -m benchmarks --write /tmp/run.md   # a report of the run (RESULTS.md is curated)
python -m benchmarks --sizes --get-size 0 --watch-rounds 0 --object-sizes --rss-mib 0   # CAS only
python -m benchmarks.consumer_groups     # consumer groups only (also part of the full run)
python -m benchmarks --sizes --get-size 0 --cas-writes 0 --watch-rounds 0 --object-sizes \
    --pcg-messages 0 --rss-mib 0         # the blocking client vs the async API only
python -m benchmarks --curves benchmarks/curves.json   # also the cost curves to 1M keys (minutes)
python -m benchmarks --spark-read-keys 500000   # also natskv partition reads (spark extra)
python -m benchmarks --spark-stream-rows 200000 # also the natskv stream writer (spark extra)
python -m benchmarks.frames              # the protocol reader alone vs nats-py's parser (no server)
python -m benchmarks.replication         # what R3 costs: an R3 cluster vs one server (also part
                                         # of the full run, --replication-rounds; 0 skips it)
python -m benchmarks --sizes --get-size 0 --cas-writes 0 --watch-rounds 0 --object-sizes \
    --pcg-messages 0 --sync-ops 0 --rss-mib 0 --replication-rounds 0 --lock-ops 100
                                         # locks and fenced put_many only
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import jetstream

from . import (
    consumer_groups,
    curves,
    kv_atomic,
    kv_watch,
    locks,
    objects,
    replication,
    rss,
    sync_client,
)
from ._harness import Scenario, machine, table


async def measure(args: argparse.Namespace, url: str) -> list[Scenario]:
    async with kv_atomic.clients(url) as c:
        scenarios = [kv_atomic.put_many_scenario(c, n) for n in args.sizes]
        if args.get_size:
            records = {f"rec.k{i}": kv_atomic.VALUE for i in range(args.get_size)}
            await c.bucket.put_many(records)
            scenarios.append(kv_atomic.get_many_scenario(c, args.get_size))
        if args.cas_writes:
            scenarios.append(kv_atomic.cas_scenario(c, args.cas_writes))
        for scenario in scenarios:
            await scenario.run(args.rounds)
        if args.lock_ops:
            scenarios += await locks.measure(c.bucket, args.lock_ops, 100, args.rounds)
    if args.watch_rounds:
        for during in (False, True):
            for kind in kv_watch.KINDS:
                scenarios.append(await measure_watch(args, url, kind, during))
    async with objects.stores(url) as stores:
        for mib in args.object_sizes:  # each put round purges the store: put first, then get
            putting = objects.put_scenario(stores, mib)
            await putting.run(args.object_rounds)
            getting = await objects.get_scenario(stores, mib)
            await getting.run(args.object_rounds)
            scenarios += [putting, getting]
    if args.pcg_messages:
        scenarios += await consumer_groups.measure(url, args.pcg_messages, args.pcg_rounds)
    if args.sync_ops:
        scenarios += await sync_client.measure(
            url, args.sync_ops, args.sync_watch_keys, args.sync_rounds
        )
    return scenarios


async def measure_watch(args: argparse.Namespace, url: str, kind: str, during: bool) -> Scenario:
    history = 2 if during else 1
    async with kv_watch.watch_bucket(url, args.watch_keys, kind, history) as (bucket, peer_kv):
        writer = kv_watch.Writer(url, args.watch_updates, kind)
        await writer.start()
        try:
            watching = kv_watch.watch_scenario(
                bucket, peer_kv, writer, args.watch_keys, args.watch_updates, kind, during
            )
            await watching.run(args.watch_rounds)
        finally:
            await writer.close()
        return watching


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--sizes", type=int, nargs="*", default=[10, 100, 1000])
    parser.add_argument("--get-size", type=int, default=100, help="0 skips the get_many run")
    parser.add_argument("--cas-writes", type=int, default=200, help="0 skips the CAS run")
    parser.add_argument(
        "--lock-ops",
        type=int,
        default=100,
        help="lock acquire/release cycles per round, and a fenced put_many of 100 keys; 0 skips",
    )
    parser.add_argument("--watch-keys", type=int, default=100_000)
    parser.add_argument("--watch-updates", type=int, default=20_000)
    parser.add_argument("--watch-rounds", type=int, default=3, help="0 skips the watch")
    parser.add_argument("--object-sizes", type=int, nargs="*", default=[1, 16, 128])
    parser.add_argument("--object-rounds", type=int, default=3)
    parser.add_argument(
        "--pcg-messages", type=int, default=2000, help="consumer groups; 0 skips them"
    )
    parser.add_argument("--pcg-rounds", type=int, default=3)
    parser.add_argument(
        "--sync-ops", type=int, default=500, help="blocking client vs async; 0 skips it"
    )
    parser.add_argument("--sync-watch-keys", type=int, default=20_000)
    parser.add_argument("--sync-rounds", type=int, default=7)
    parser.add_argument("--rss-mib", type=int, default=1024, help="0 skips the RSS run")
    parser.add_argument(
        "--curves",
        type=Path,
        help="also run the cost curves (10k-1M keys, 1-1024 MiB objects: minutes) and write "
        "their raw numbers to this JSON (plot it with python -m benchmarks.curves --plot)",
    )
    parser.add_argument(
        "--spark-read-keys",
        type=int,
        default=0,
        help="natskv partition reads vs the earlier read at this many keys (spark extra); 0 skips",
    )
    parser.add_argument(
        "--spark-stream-rows",
        type=int,
        default=0,
        help="the natskv stream writer vs the batch writer and a per-row foreachBatch at this "
        "many rows (spark extra); 0 skips",
    )
    parser.add_argument(
        "--replication-rounds",
        type=replication.count,
        default=replication.Settings.rounds,
        help="rounds of the replication comparison (python -m benchmarks.replication at its "
        "default sizes: one server and a 3-node R3 cluster, about a minute); 0 skips it",
    )
    parser.add_argument("--write", type=Path, help="also write a markdown report here")
    args = parser.parse_args()
    with jetstream.EmbeddedServer() as server:
        scenarios = asyncio.run(measure(args, server.url))
    command = "python -m benchmarks " + " ".join(sys.argv[1:])
    report = (
        f"Command: `{command.strip()}`  \nMachine: {machine()}  \n"
        f"Medians of {args.rounds} interleaved rounds ({args.watch_rounds} for the watch, "
        f"{args.object_rounds} for objects, {args.pcg_rounds} for consumer groups, "
        f"{args.sync_rounds} for the blocking client) after one "
        "warm-up; KV values of 100 bytes.\n\n"
        f"{table(scenarios)}\n"
    )
    if args.rss_mib:
        report += (
            f"\nPeak memory, each operation in a fresh process:\n\n{rss.measure(args.rss_mib)}\n"
        )
    if args.curves:
        data = curves.run(curves.KEY_SIZES, curves.OBJECT_SIZES)
        args.curves.write_text(json.dumps(data, indent=1) + "\n")
        report += f"\nCost curves, each operation in a fresh process:\n\n{curves.markdown(data)}\n"
    if args.replication_rounds:
        settings = replication.Settings(rounds=args.replication_rounds)
        report += f"\nWhat replication costs, R3 vs R1:\n\n{replication.run(settings)}"
    if args.spark_read_keys:
        from . import spark_kv_read

        for history in (1, 4):
            report += "\n" + spark_kv_read.processes(args.spark_read_keys, history, [1, 2, 4], 3)
            report += "\n"
    if args.spark_stream_rows:
        from . import spark_stream

        report += "\nSpark streaming writes:\n\n" + spark_stream.measure(args.spark_stream_rows)
        report += "\n"
    print(report)
    if args.write:
        args.write.write_text(report)


if __name__ == "__main__":
    main()
