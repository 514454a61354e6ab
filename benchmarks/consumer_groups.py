"""Partitioned consumer groups' parallelism: a 4-member elastic group vs one strictly ordered
consumer, both with ``max_ack_pending=1`` (one message in flight per consumer: each key's
messages processed strictly in order) and 1 ms of (awaited, I/O-like) work per message, side
by side on one embedded nats-server (issue 14's goal: the group >= 3x the single consumer).
The group runs twice: its 4 members in 4 processes (as deployed) and in this one process
(4 connections, one event loop), each against the single consumer in its own interleaved
rounds.

Each round publishes the messages first (untimed; for the group also until the work-queue
stream has sourced them all; member processes are started untimed too), then times from
starting the consumer(s) to the last message handled and acked. Keys are picked so that each
of the 4 partitions gets the same number of messages: with hashed keys the busiest partition
sets the pace.

python -m benchmarks.consumer_groups                    # 2000 messages, 3 rounds
python -m benchmarks.consumer_groups --messages 500 --rounds 1
python -m benchmarks.consumer_groups --messages 600 --work-ms 5   # where the overhead is small
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Final

import jetstream
import pcgroups

from ._harness import Scenario, machine, table

MEMBERS: Final = 4
KEYS_PER_PARTITION: Final = 8
WORK: Final = 0.001  # seconds of work per message (default)
SOURCE, SINGLE, GROUP = "bench_pcg", "bench_pcg_one", "g"
PROCESSES_VARIANT = f"{MEMBERS}-member elastic group, {MEMBERS} processes"
IN_PROCESS_VARIANT = f"{MEMBERS}-member elastic group, 1 process"
SINGLE_VARIANT = "1 consumer"

Timed = Callable[[], Awaitable[float]]


def balanced_keys() -> list[str]:
    """``KEYS_PER_PARTITION`` keys for each partition, interleaved (partition 0, 1, 2, 3, 0 ...)."""
    per: dict[int, list[str]] = {p: [] for p in range(MEMBERS)}
    i = 0
    while any(len(keys) < KEYS_PER_PARTITION for keys in per.values()):
        key = f"k{i}"
        keys = per[pcgroups.wire.hash_partition(key.encode(), MEMBERS)]
        if len(keys) < KEYS_PER_PARTITION:
            keys.append(key)
        i += 1
    return [per[p][k] for k in range(KEYS_PER_PARTITION) for p in range(MEMBERS)]


class Bench:
    """The two setups on one server; each variant returns the seconds it measured."""

    def __init__(
        self, url: str, js: jetstream.JetStream, messages: int, work: float, replicas: int = 1
    ) -> None:
        self.url = url
        self.js = js
        self.messages = messages
        self.work = work
        self.replicas = replicas
        self.keys = balanced_keys()

    async def setup(self) -> None:
        for name in (SOURCE, SINGLE):
            config = jetstream.StreamConfig(
                name=name, subjects=[f"{name}.*"], num_replicas=self.replicas
            )
            await self.js.add_stream(config)
        await pcgroups.create_elastic(
            self.js,
            SOURCE,
            GROUP,
            max_members=MEMBERS,
            filters=[pcgroups.PartitioningFilter(f"{SOURCE}.*", (1,))],
        )
        await pcgroups.add_members(self.js, SOURCE, GROUP, [f"m{i}" for i in range(MEMBERS)])

    async def teardown(self) -> None:
        with contextlib.suppress(jetstream.JetStreamError):
            await pcgroups.delete_elastic(self.js, SOURCE, GROUP)
        for name in (SOURCE, SINGLE):
            with contextlib.suppress(jetstream.JetStreamError):
                await self.js.delete_stream(name)

    async def _publish(self, stream: str) -> None:
        subjects = [f"{stream}.{self.keys[i % len(self.keys)]}" for i in range(self.messages)]
        for start in range(0, len(subjects), 200):
            chunk = subjects[start : start + 200]
            await asyncio.gather(*(self.js.publish(s, b"x" * 100) for s in chunk))

    async def _stream_holds(self, stream: str, count: int) -> None:
        deadline = time.monotonic() + 60
        while (await self.js.stream_info(stream)).state.messages != count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{stream} never held {count} messages")
            await asyncio.sleep(0.01)

    async def _fill_work_queue(self) -> None:
        await self._publish(SOURCE)
        await self._stream_holds(pcgroups.wire.elastic_stream_name(SOURCE, GROUP), self.messages)

    async def _work_queue_empty(self) -> None:
        # the acks are in: the work queue is empty again for the next round
        await self._stream_holds(pcgroups.wire.elastic_stream_name(SOURCE, GROUP), 0)

    async def shares(self) -> dict[str, int]:
        """How many of the messages each member receives (its partitions' share)."""
        config = await pcgroups.elastic_config(self.js, SOURCE, GROUP)
        owner = {
            int(f.split(".", 1)[0]): member
            for member in config.members
            for f in pcgroups.wire.elastic_member_filters(config, member)
        }
        counts = dict.fromkeys(config.members, 0)
        for i in range(self.messages):
            key = self.keys[i % len(self.keys)]
            counts[owner[pcgroups.wire.hash_partition(key.encode(), MEMBERS)]] += 1
        return counts

    async def group_processes(self) -> float:
        """4 member processes (started untimed, joining on "go"), until each has handled
        its partitions' share."""
        await self._fill_work_queue()
        procs = []
        try:
            for member, share in (await self.shares()).items():
                procs.append(await _member_process(self.url, member, share, self.work))
            for proc in procs:
                assert proc.stdout is not None
                assert (await proc.stdout.readline()).strip() == b"ready"
            start = time.perf_counter()
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write(b"go\n")
                await proc.stdin.drain()
            for proc in procs:
                assert proc.stdout is not None
                assert (await proc.stdout.readline()).strip() == b"done"
            elapsed = time.perf_counter() - start
        finally:
            for proc in procs:
                if proc.returncode is None and proc.stdin is not None:
                    proc.stdin.close()
                await proc.wait()
        await self._work_queue_empty()
        return elapsed

    async def group_in_process(self) -> float:
        """4 members in this process, each on its own connection, until every message is
        acked."""
        await self._fill_work_queue()
        handled = 0
        all_handled = asyncio.Event()

        async def handle(msg: pcgroups.GroupMessage) -> None:
            nonlocal handled
            await asyncio.sleep(self.work)
            await msg.ack()
            handled += 1
            if handled == self.messages:
                all_handled.set()

        config = jetstream.ConsumerConfig(max_ack_pending=1)
        async with contextlib.AsyncExitStack() as stack:
            conns = [
                await stack.enter_async_context(await jetstream.connect(self.url))
                for _ in range(MEMBERS)
            ]
            start = time.perf_counter()
            for i, js in enumerate(conns):
                member = pcgroups.consume_elastic(js, SOURCE, GROUP, f"m{i}", handle, config=config)
                await stack.enter_async_context(member)
            await all_handled.wait()
            elapsed = time.perf_counter() - start
        await self._work_queue_empty()
        return elapsed

    async def single(self, max_ack_pending: int = 1) -> float:
        """One consumer (``max_ack_pending=1`` unless given) over every key, until every
        message is acked."""
        await self.js.purge_stream(SINGLE)
        await self._publish(SINGLE)
        handled = 0
        all_handled = asyncio.Event()

        async def handle(msg: jetstream.PullMessage) -> None:
            nonlocal handled
            await asyncio.sleep(self.work)
            await msg.ack()
            handled += 1
            if handled == self.messages:
                all_handled.set()

        async with await jetstream.connect(self.url) as js:
            start = time.perf_counter()
            consumer = await js.create_consumer(
                SINGLE,
                jetstream.ConsumerConfig(
                    name="one", ack_policy="explicit", max_ack_pending=max_ack_pending
                ),
            )
            async with consumer.consume(handle):
                await all_handled.wait()
                elapsed = time.perf_counter() - start
            await js.delete_consumer(SINGLE, "one")
        return elapsed


async def run_rounds(scenario: Scenario, variants: dict[str, Timed], rounds: int) -> None:
    """Like ``Scenario.run`` (rotating order, one warm-up round), with each variant timing
    only its own measured part."""
    names = list(variants)
    for round_no in range(rounds + 1):
        order = names[round_no % len(names) :] + names[: round_no % len(names)]
        for name in order:
            elapsed = await variants[name]()
            if round_no:
                scenario.timings.setdefault(name, []).append(elapsed)


async def measure(url: str, messages: int, rounds: int, work: float = WORK) -> list[Scenario]:
    """The group (in member processes, then in one process) vs the single consumer over
    ``messages`` messages, ``rounds`` rounds each, ``work`` seconds of work per message."""
    scenarios = []
    async with await jetstream.connect(url) as js:
        bench = Bench(url, js, messages, work)
        await bench.setup()
        try:
            for name, group in (
                (PROCESSES_VARIANT, bench.group_processes),
                (IN_PROCESS_VARIANT, bench.group_in_process),
            ):
                variants: dict[str, Timed] = {name: group, SINGLE_VARIANT: bench.single}
                scenario = Scenario(
                    f"{messages:,} msgs, max_ack_pending=1, {work * 1e3:g} ms work each",
                    messages,
                    {variant: untimed for variant in variants},
                    baseline=name,
                    unit="msgs",
                )
                await run_rounds(scenario, variants, rounds)
                scenarios.append(scenario)
        finally:
            await bench.teardown()
    return scenarios


async def _member_process(
    url: str, member: str, share: int, work: float
) -> asyncio.subprocess.Process:
    args = ["-m", "benchmarks._pcg_member", url, SOURCE, GROUP, member, str(share), str(work)]
    return await asyncio.create_subprocess_exec(
        sys.executable, *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )


async def untimed() -> None:  # Scenario wants variants; run_rounds calls the timed ones
    raise NotImplementedError


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.consumer_groups", description=__doc__
    )
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work-ms", type=float, default=WORK * 1e3, help="work per message")
    args = parser.parse_args()
    with jetstream.EmbeddedServer() as server:
        scenarios = asyncio.run(measure(server.url, args.messages, args.rounds, args.work_ms / 1e3))
    command = "python -m benchmarks.consumer_groups " + " ".join(sys.argv[1:])
    print(f"Command: `{command.strip()}`  \nMachine: {machine()}  \n")
    print(f"Medians of {args.rounds} interleaved rounds after one warm-up.\n")
    print(table(scenarios))


if __name__ == "__main__":
    main()
