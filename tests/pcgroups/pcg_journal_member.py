"""A group member in its own process that journals what it does, for the multi-process tests
(``group_journal.py`` starts it and checks the journals).

Each message (a KV value for a watch group) carries ``<key>:<n>``, or ``<key>:<n>:<work>`` and
``<key>:<n>:<work>:<every>``: the work then takes exactly ``<work>`` seconds (otherwise a
random 0..DELAY; ``<first>/<again>``: ``<again>`` seconds when delivered again), calling
``in_progress()`` every ``<every>`` seconds meanwhile. Per message the member appends to its
journal file (one ``os.write`` per line, so a kill -9 loses nothing already written):

    S <key> <n> <delivered> <t>   before the work
    P <key> <n> <delivered> <t>   once an in_progress() is sent
    C <key> <n> <delivered> <t>   the work was cancelled (the member cancelled its handler)
    E <key> <n> <delivered> <t>   after the work, before the ack
    A <key> <n> <delivered> <t>   once the ack is sent (--flush: once it reached the server;
                                  --confirm: once the server confirmed it)
    T - 0 0 <t>                   stop() returned (after a ``stop`` line on stdin)

``t`` is ``time.monotonic_ns()`` (CLOCK_MONOTONIC: one clock for every process on the
machine). It prints ``ready`` once it has joined.

Usage: python pcg_journal_member.py URL KIND STREAM GROUP MEMBER JOURNAL [--ack-wait S]
       [--max-ack-pending N] [--delay S|LOW:HIGH] [--flush] [--confirm] [--timeout S]
       [--iterate]
       (KIND static|elastic|watch; for watch, STREAM is the bucket; --timeout: the request
       timeout of the member's connection; --iterate: the same work in an ``async for`` over
       the member instead of a handler; --confirm: consume with ``confirm_acks``)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from typing import Any

import jetstream
import kvstore
import pcgroups


class JournalFile:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def line(self, tag: str, key: str = "-", n: str = "0", delivered: int = 0) -> None:
        os.write(self.fd, f"{tag} {key} {n} {delivered} {time.monotonic_ns()}\n".encode())


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    for name in ("url", "kind", "stream", "group", "member", "journal"):
        parser.add_argument(name)
    parser.add_argument("--ack-wait", type=float, default=2.0)
    parser.add_argument("--max-ack-pending", type=int, default=1)
    parser.add_argument("--delay", type=_work_range, default=(0.0, 0.001))
    parser.add_argument("--flush", action="store_true")
    parser.add_argument("--confirm", action="store_true")
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--iterate", action="store_true")
    return parser.parse_args(argv)


def _work_range(text: str) -> tuple[float, float]:
    """``HIGH`` (work of 0 to HIGH seconds) or ``LOW:HIGH``."""
    low, _, high = text.rpartition(":")
    return float(low or 0), float(high)


def planned_work(
    plan: list[str], delivered: int, delay: tuple[float, float]
) -> tuple[float, float]:
    """(seconds of work, seconds between in-progress calls or 0) for a message's plan."""
    if not plan:
        return random.uniform(*delay), 0.0
    first, _, again = plan[0].partition("/")
    seconds = float(again) if again and delivered > 1 else float(first)
    return seconds, float(plan[1]) if len(plan) > 1 else 0.0


async def work(item: Any, seconds: float, every: float, journal: JournalFile, *where: Any) -> None:
    """Work for ``seconds``, calling ``in_progress()`` every ``every`` seconds (0: never)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        await asyncio.sleep(min(left, every) if every else left)
        if every and end - time.monotonic() > 0:
            await item.in_progress()
            journal.line("P", *where)


async def stop_on_request(running: Any, journal: JournalFile, asked: asyncio.Event) -> None:
    """Stop the member when a ``stop`` line arrives on stdin."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while (line := await reader.readline()) and line.strip() != b"stop":
        pass
    if line:
        asked.set()
        await running.stop()
        journal.line("T")


async def main(args: argparse.Namespace) -> None:
    journal = JournalFile(args.journal)
    async with await jetstream.connect(args.url, timeout=args.timeout) as js:

        async def handle(item: Any) -> None:  # a GroupMessage, or a KeyChange (watch)
            data = item.value if args.kind == "watch" else item.data
            key, n, *plan = data.decode().split(":")
            delivered = item.delivered if args.kind == "watch" else item.raw.metadata.delivered
            seconds, every = planned_work(plan, delivered, args.delay)
            where = (key, n, delivered)
            journal.line("S", *where)
            try:
                await work(item, seconds, every, journal, *where)
            except asyncio.CancelledError:
                journal.line("C", *where)
                raise
            journal.line("E", *where)
            await item.ack()
            if args.flush:  # the server has the ack (survives a kill -9 of this process)
                await js.nc.flush(timeout=args.ack_wait)  # not 10 s, when the server died
            journal.line("A", *where)

        config = jetstream.ConsumerConfig(
            ack_wait=args.ack_wait,  # type: ignore[arg-type]  # seconds are accepted
            max_ack_pending=args.max_ack_pending,
        )
        handler = None if args.iterate else handle
        options = {"config": config, "confirm_acks": args.confirm}
        if args.kind == "watch":
            bucket = await kvstore.open_bucket(js, args.stream)
            running: Any = pcgroups.watch_group(bucket, args.group, args.member, handler, **options)
        else:
            consume = pcgroups.consume_static if args.kind == "static" else pcgroups.consume_elastic
            running = consume(js, args.stream, args.group, args.member, handler, **options)
        async with running:
            print("ready", flush=True)
            asked = asyncio.Event()
            stopper = asyncio.create_task(stop_on_request(running, journal, asked))
            if args.iterate:
                async for item in running:
                    await handle(item)
            await running.done()
            if not asked.is_set():
                stopper.cancel()
            await asyncio.wait({stopper})


if __name__ == "__main__":
    asyncio.run(main(arguments(sys.argv[1:])))
