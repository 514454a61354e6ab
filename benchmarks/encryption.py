"""Client-side encryption's cost: encrypted vs plain ``put_many``/``get_many`` of 100-byte KV
values and object put/get, side by side on one embedded nats-server (issue 15's goal: >= 0.9x
of plain for KV, >= 0.85x for objects). The key is random, made for the run.

python -m benchmarks.encryption                       # 1000 keys, 128 MiB, 7/3 rounds
python -m benchmarks.encryption --keys 1000 --mib 16 --rounds 3 --object-rounds 1
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

import jetstream
import kvstore
import objstore

from ._harness import Scenario, machine, table

MIB = 1024 * 1024
VALUE = b"v" * 100


async def measure(url: str, args: argparse.Namespace) -> list[Scenario]:
    ring = jetstream.Keyring({"bench": jetstream.Keyring.new_key()}, primary="bench")
    scenarios: list[Scenario] = []
    async with await jetstream.connect(url) as js:
        plain = await kvstore.create_bucket(js, "bench_plain")
        sealed = await kvstore.create_bucket(js, "bench_sealed", encryption=ring)
        items = {f"k.{i}": VALUE for i in range(args.keys)}
        scenarios.append(
            Scenario(
                f"put_many({args.keys})",
                args.keys,
                {
                    "encrypted": lambda: _ignore(sealed.put_many(items)),
                    "plain": lambda: _ignore(plain.put_many(items)),
                },
                baseline="encrypted",
            )
        )
        scenarios.append(
            Scenario(
                f"get_many({args.keys})",
                args.keys,
                {
                    "encrypted": lambda: _ignore(sealed.get_many(items)),
                    "plain": lambda: _ignore(plain.get_many(items)),
                },
                baseline="encrypted",
            )
        )
        for scenario in scenarios:
            await scenario.run(args.rounds)
        if args.mib:
            scenarios += await _objects(js, ring, args)
        for name in ("bench_plain", "bench_sealed"):
            await kvstore.delete_bucket(js, name)
    return scenarios


async def _objects(
    js: jetstream.JetStream, ring: jetstream.Keyring, args: argparse.Namespace
) -> list[Scenario]:
    data = os.urandom(args.mib * MIB)
    plain = await objstore.create_store(js, "bench_plain_obj")
    sealed = await objstore.create_store(js, "bench_sealed_obj", encryption=ring)
    try:
        putting = Scenario(
            f"object put {args.mib} MiB",
            args.mib,
            {
                "encrypted": lambda: _ignore(sealed.put("x", data)),
                "plain": lambda: _ignore(plain.put("x", data)),
            },
            baseline="encrypted",
            unit="MiB",
        )
        await putting.run(args.object_rounds)
        getting = Scenario(
            f"object get {args.mib} MiB",
            args.mib,
            {"encrypted": lambda: _drain(sealed, "x"), "plain": lambda: _drain(plain, "x")},
            baseline="encrypted",
            unit="MiB",
        )
        await getting.run(args.object_rounds)
        return [putting, getting]
    finally:
        for name in ("bench_plain_obj", "bench_sealed_obj"):
            await objstore.delete_store(js, name)


async def _ignore(awaitable: object) -> None:
    await awaitable  # type: ignore[misc]


async def _drain(store: objstore.ObjectStore, name: str) -> None:
    async with store.open(name) as reader:
        async for _ in reader:
            pass


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.encryption", description=__doc__)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--mib", type=int, default=128, help="0 skips objects")
    parser.add_argument("--object-rounds", type=int, default=3)
    args = parser.parse_args()
    with jetstream.EmbeddedServer() as server:
        scenarios = asyncio.run(measure(server.url, args))
    command = "python -m benchmarks.encryption " + " ".join(sys.argv[1:])
    print(f"Command: `{command.strip()}`  \nMachine: {machine()}  \n")
    print("'ours is N x faster' is plain's median / encrypted's: the share of plain's speed.\n")
    print(table(scenarios))


if __name__ == "__main__":
    main()
