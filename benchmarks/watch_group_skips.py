"""How many revisions a KV watch group never sees: the group's work queue sources the bucket a
little behind the writes, and a revision the bucket has already dropped by then (overwritten
beyond ``history``, removed by a purge) is not sourced. Every write here is a put (70 %), a
delete (15 %) or a purge (15 %) of a random key, from ``writers`` concurrent writers.

python -m benchmarks.watch_group_skips --writers 1 10 50 --history 1 64 --ops 3000 --keys 500
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time

import jetstream
import kvstore
import pcgroups


async def one_run(
    js: jetstream.JetStream, args: argparse.Namespace, writers: int, history: int
) -> str:
    name = f"skips_{writers}_{history}"
    bucket = await kvstore.create_bucket(js, name, history=history)
    try:
        await pcgroups.create_bucket_group(bucket, "g", max_members=3)
        rng = random.Random(writers * 1000 + history)
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(args.ops):
            queue.put_nowait(i)

        async def writer() -> None:
            while not queue.empty():
                queue.get_nowait()
                key, roll = f"k{rng.randrange(args.keys)}", rng.random()
                if roll < 0.7:
                    await bucket.put(key, b"v")
                elif roll < 0.85:
                    await bucket.delete(key)
                else:
                    await bucket.purge(key)

        start = time.monotonic()
        await asyncio.gather(*(writer() for _ in range(writers)))
        rate = args.ops / (time.monotonic() - start)
        work_queue = pcgroups.wire.elastic_stream_name(bucket.stream, "g")
        while True:  # until the source has caught up
            sources = (await js.stream_info(work_queue)).sources or []
            if sources and sources[0].lag == 0:
                break
            await asyncio.sleep(0.05)
        last = (await js.stream_info(bucket.stream)).state.last_seq
        sourced = (await js.stream_info(work_queue)).state.messages
        return (
            f"| {writers} | {history} | {rate:.0f} | {last} | {last - sourced} "
            f"({100 * (last - sourced) / last:.1f} %) |"
        )
    finally:
        await pcgroups.delete_bucket_group(bucket, "g")
        await kvstore.delete_bucket(js, name)


async def main(args: argparse.Namespace) -> None:
    async with jetstream.EmbeddedServer() as server, await jetstream.connect(server.url) as js:
        print("| writers | history | writes/s | revisions | never sourced |")
        print("|---|---|---|---|---|")
        for writers in args.writers:
            for history in args.history:
                print(await one_run(js, args, writers, history), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--history", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--ops", type=int, default=3000)
    parser.add_argument("--keys", type=int, default=500)
    asyncio.run(main(parser.parse_args()))
