"""Where an object transfer's time goes: wall time, client CPU and server CPU of ``open()``
and ``put`` next to their ceilings (the ordered consumer without hashing; core publishes
without acks), interleaved on one embedded nats-server. A ratio below the goal with the
client's CPU close to the wall time means the client is the bottleneck; the sum of client
and server CPU over the cores says how far overlap could take it (issue 17, deliverables 3
and 4).

python -m benchmarks.object_cpu                  # 128 MiB, 4 rounds
python -m benchmarks.object_cpu --mib 16 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

import jetstream
import objstore

from ._harness import machine, processes_cpu
from .objects import MIB, STORE, _chunks, publish_until_stored

Operation = Callable[[], Awaitable[None]]


async def _measure(server_pid: int, operation: Operation) -> tuple[float, float, float]:
    """(wall, client CPU, server CPU) seconds of one run of ``operation``."""
    server_before = processes_cpu([server_pid])
    wall, cpu = time.perf_counter(), time.process_time()
    await operation()
    return (
        time.perf_counter() - wall,
        time.process_time() - cpu,
        processes_cpu([server_pid]) - server_before,
    )


async def measure(server: jetstream.EmbeddedServer, mib: int, rounds: int) -> list[str]:
    """Table rows: per operation the median wall, client CPU and server CPU, the rate and
    the ratio to its ceiling."""
    assert server.pid is not None
    data = os.urandom(mib * MIB)
    async with await jetstream.connect(server.url) as js:
        store = await objstore.create_store(js, STORE)
        try:
            info = await store.put("get", data)

            async def download_ceiling() -> None:
                async for _ in _chunks(js, store, info):
                    pass

            async def opened() -> None:
                async with store.open("get") as reader:
                    async for _ in reader:
                        pass

            async def upload_ceiling() -> None:
                await publish_until_stored(js, store, data)

            async def put() -> None:
                await store.put("put", data)

            pairs = {
                "download": (("ordered consumer, no hash", download_ceiling), ("open()", opened)),
                "upload": (("core publish, no acks", upload_ceiling), ("put", put)),
            }
            runs: dict[str, list[tuple[float, float, float]]] = {}
            for _ in range(rounds):
                for pair in pairs.values():
                    for name, operation in pair:
                        runs.setdefault(name, []).append(await _measure(server.pid, operation))
                await js.purge_stream(store.stream, subject=f"$O.{STORE}.C.ceiling")
                # Each put lands on a deleted name, as in ``python -m benchmarks`` (a put that
                # replaces an object also purges the old chunks: more server work, timed).
                await store.delete("put")
            rows = []
            for (ceiling, _), (ours, _) in pairs.values():
                for name in (ceiling, ours):
                    wall, client, served = (
                        statistics.median(r[i] for r in runs[name]) for i in range(3)
                    )
                    ceiling_wall = statistics.median(r[0] for r in runs[ceiling])
                    rows.append(
                        f"| {name} | {wall * 1000:.0f} ms | {client * 1000:.0f} ms "
                        f"| {served * 1000:.0f} ms | {mib / wall:.0f} MiB/s "
                        f"| {ceiling_wall / wall:.2f}x |"
                    )
            return rows
        finally:
            await objstore.delete_store(js, STORE)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.object_cpu", description=__doc__)
    parser.add_argument("--mib", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    with jetstream.EmbeddedServer() as server:
        rows = asyncio.run(measure(server, args.mib, args.rounds))
    command = "python -m benchmarks.object_cpu " + " ".join(sys.argv[1:])
    print(f"Command: `{command.strip()}`  \nMachine: {machine()}  \n")
    print(f"Medians of {args.rounds} interleaved rounds, {args.mib} MiB.\n")
    print("| operation | wall | client CPU | server CPU | rate | of its ceiling |")
    print("|---|---:|---:|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
