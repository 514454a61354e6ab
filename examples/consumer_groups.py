"""Consumer groups: three worker processes share a stream of orders, each customer's orders
handled by one worker at a time and in order; one worker is killed (-9) mid-flow and a new
instance of it takes over its customers.

The group is elastic (``pcgroups.create_elastic``): the server copies ``orders.<customer>``
into a work-queue stream ``orders-fulfilment`` with a partition number in front (a hash of the
customer), and each member consumes the partitions the group assigns it. Every worker here is
a child process running this file with ``worker``. Runs against $NATS_URL when set,
otherwise an embedded nats-server on a free loopback port.

    python examples/consumer_groups.py
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import jetstream
import pcgroups

STREAM, GROUP = "orders", "fulfilment"
WORKERS = ["worker-1", "worker-2", "worker-3"]
CUSTOMERS = [f"c{i:02}" for i in range(1, 13)]
ACK_WAIT = 2.0  # seconds; also how long a killed worker keeps its customers (pin timeout)


@contextlib.asynccontextmanager
async def nats_url() -> AsyncIterator[str]:
    """$NATS_URL if given, else the URL of an embedded server that lives for the block."""
    if url := os.environ.get("NATS_URL"):
        print(f"using the NATS server at {url} (from NATS_URL)")
        yield url
        return
    async with jetstream.EmbeddedServer() as server:
        print(f"using an embedded nats-server at {server.url} (pid {server.pid})")
        yield server.url


# -- the worker (a child process) -------------------------------------------------------------


async def worker(url: str, member: str) -> None:
    """Consume as ``member`` until stdin closes; one line per processed order on stdout."""

    async def handle(msg: pcgroups.GroupMessage) -> None:
        order = json.loads(msg.data)
        start = time.time()
        await asyncio.sleep(0.005)  # the work: 5 ms per order
        delivered = msg.raw.metadata.delivered
        line = [order["customer"], order["n"], msg.partition, delivered, start, time.time()]
        # Before the ack: never lost if acked. One write, so a kill cannot cut the line (with
        # PYTHONUNBUFFERED, print() writes each of its pieces separately).
        sys.stdout.write(f"done {json.dumps(line)}\n")
        sys.stdout.flush()
        await msg.ack()

    # max_ack_pending=1: the next order is handed out only once the previous one is acked, so
    # after a kill the one unacked order comes back first and each customer's order holds.
    config = jetstream.ConsumerConfig(ack_wait=ACK_WAIT, max_ack_pending=1)
    async with (
        await jetstream.connect(url) as js,
        pcgroups.consume_elastic(js, STREAM, GROUP, member, handle, config=config) as running,
    ):
        print("ready", json.dumps(running.partitions), flush=True)
        await asyncio.to_thread(sys.stdin.buffer.read)  # the demo closes stdin to stop us
    # leaving the block stops the member: it releases its pin, a new instance takes over at once


# -- the demo ---------------------------------------------------------------------------------


@dataclass
class Worker:
    """A worker process and what it reported."""

    member: str
    proc: asyncio.subprocess.Process
    done: list[tuple[str, int, int, int, float, float]] = field(default_factory=list)
    partitions: list[int] = field(default_factory=list)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    reader: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, url: str, member: str) -> Worker:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "worker",
            url,
            member,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        started = cls(member, proc)
        started.reader = asyncio.create_task(started._read())
        return started

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            if not line.endswith(b"\n"):
                break  # cut by a kill: that order was not acked, it comes back
            word, _, rest = line.decode().partition(" ")
            if word == "ready":
                self.partitions = json.loads(rest)
                self.ready.set()
            elif word == "done":
                self.done.append(tuple(json.loads(rest)))

    async def kill(self) -> None:
        self.proc.kill()  # SIGKILL: no goodbye, its pin stays until it times out
        await self.proc.wait()

    async def stop(self) -> None:
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            await self.proc.wait()
        if self.reader is not None:
            await self.reader


async def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting until {what}")
        await asyncio.sleep(0.01)


async def publish(js: jetstream.JetStream, orders: range) -> None:
    for n in orders:  # order n of every customer, round robin
        for customer in CUSTOMERS:
            body = json.dumps({"customer": customer, "n": n}).encode()
            await js.publish(f"{STREAM}.{customer}", body)


async def main() -> None:
    async with nats_url() as url, await jetstream.connect(url) as js:
        await js.add_stream(jetstream.StreamConfig(name=STREAM, subjects=[f"{STREAM}.*"]))
        try:
            await demo(js, url)
        finally:
            with contextlib.suppress(pcgroups.GroupNotFoundError):
                await pcgroups.delete_elastic(js, STREAM, GROUP)
            await js.delete_stream(STREAM)


async def demo(js: jetstream.JetStream, url: str) -> None:
    # 6 partitions by customer (the 1st wildcard of orders.*), spread over the 3 members
    await pcgroups.create_elastic(
        js, STREAM, GROUP, max_members=6, filters=[pcgroups.PartitioningFilter("orders.*", (1,))]
    )
    await pcgroups.add_members(js, STREAM, GROUP, WORKERS)
    workers = {m: await Worker.start(url, m) for m in WORKERS}
    replacement = None
    try:
        for w in workers.values():
            await asyncio.wait_for(w.ready.wait(), 30)
            mine = [
                c for c in CUSTOMERS if pcgroups.wire.hash_partition(c.encode(), 6) in w.partitions
            ]
            print(f"{w.member} (pid {w.proc.pid}) owns partitions {w.partitions}: {mine}")
        everyone = list(workers.values())

        await publish(js, range(0, 15))  # 180 orders
        print(f"published 180 orders of {len(CUSTOMERS)} customers")
        victim = workers["worker-2"]
        await wait_until(lambda: len(victim.done) >= 20, "worker-2 is busy")
        await victim.kill()
        killed_at = time.time()
        print(f"killed worker-2 (pid {victim.proc.pid}, kill -9) after {len(victim.done)} orders")

        await publish(js, range(15, 30))  # 180 more; worker-2's customers wait for it
        replacement = await Worker.start(url, "worker-2")
        everyone.append(replacement)
        await asyncio.wait_for(replacement.ready.wait(), 30)
        print(f"started a new worker-2 (pid {replacement.proc.pid})")
        total = 30 * len(CUSTOMERS)
        await wait_until(lambda: len(processed(everyone)) == total, "every order is processed")
        took_over = min(start for *_, start, _ in replacement.done) - killed_at
        print(f"the new worker-2 took over {took_over:.1f} s after the kill (pin timeout)")
    finally:
        for w in [*workers.values(), *([replacement] if replacement else [])]:
            await w.stop()
    check(everyone, total)


def processed(workers: list[Worker]) -> set[tuple[str, int]]:
    return {(customer, n) for w in workers for customer, n, *_ in w.done}


def check(workers: list[Worker], total: int) -> None:
    """Every order processed; per customer, in order and by one worker at a time."""
    assert len(processed(workers)) == total
    by_customer: dict[str, list[tuple[float, float, int]]] = {}
    for w in workers:
        for customer, n, _, _, start, end in w.done:
            by_customer.setdefault(customer, []).append((start, end, n))
    for customer, history in by_customer.items():
        history.sort()
        numbers = [n for _, _, n in history]
        # a redelivery repeats the order the killed worker had not acked, nothing older
        assert numbers == sorted(numbers), f"{customer} out of order: {numbers}"
        for (_, end, _), (start, _, _) in itertools.pairwise(history):
            assert start >= end, f"{customer}: two orders processed at once"
    again = sum(1 for w in workers for *_, delivered, _, _ in w.done if delivered > 1)
    for w in workers:
        print(f"{w.member} (pid {w.proc.pid}) processed {len(w.done)} orders")
    print(
        f"all {total} orders processed, {again} redelivered after the kill; every customer's "
        "orders in order, one worker at a time"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        asyncio.run(worker(sys.argv[2], sys.argv[3]))
    else:
        asyncio.run(main())
