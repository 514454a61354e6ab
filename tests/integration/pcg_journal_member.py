"""A group member in its own process that journals what it does, for the multi-process tests
(tests/integration/test_pcgroups_processes.py).

Each message carries ``<key>:<n>``. Per message the member appends to its journal file (one
``os.write`` per line, so a kill -9 loses nothing already written):

    S <key> <n> <delivered> <t>   before the work
    E <key> <n> <delivered> <t>   after the work, before the ack
    A <key> <n> <delivered> <t>   once the ack is sent (FLUSH 1: once it reached the server;
                                  CONFIRM 1: once the server confirmed it)

``t`` is ``time.monotonic_ns()`` (CLOCK_MONOTONIC: one clock for every process on the
machine). It prints ``ready`` once it has joined.

Usage: python pcg_journal_member.py URL KIND STREAM GROUP MEMBER ACK_WAIT MAX_ACK_PENDING
       DELAY JOURNAL FLUSH [CONFIRM]    (KIND static|elastic, DELAY the longest work per
       message in seconds, FLUSH 1 to wait for the server to have each ack before journalling
       it, CONFIRM 1 to consume with ``confirm_acks``)
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time

import jetstream
import pcgroups


class JournalFile:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def line(self, tag: str, msg: pcgroups.GroupMessage) -> None:
        key, n = msg.data.decode().split(":")
        delivered = msg.raw.metadata.delivered
        os.write(self.fd, f"{tag} {key} {n} {delivered} {time.monotonic_ns()}\n".encode())


async def main(argv: list[str]) -> None:
    url, kind, stream, group, member, ack_wait, pending, delay, path, flush, *rest = argv
    options = {"confirm_acks": True} if rest == ["1"] else {}
    journal = JournalFile(path)
    longest = float(delay)

    async with await jetstream.connect(url) as js:

        async def handle(msg: pcgroups.GroupMessage) -> None:
            journal.line("S", msg)
            await asyncio.sleep(random.uniform(0, longest))
            journal.line("E", msg)
            await msg.ack()
            if flush == "1":  # the server has the ack (survives a kill -9 of this process)
                await js.nc.flush(timeout=float(ack_wait))  # not 10 s, when the server died
            journal.line("A", msg)

        consume = pcgroups.consume_static if kind == "static" else pcgroups.consume_elastic
        config = jetstream.ConsumerConfig(
            ack_wait=float(ack_wait),  # type: ignore[arg-type]  # seconds are accepted
            max_ack_pending=int(pending),
        )
        async with consume(js, stream, group, member, handle, config=config, **options) as running:
            print("ready", flush=True)
            await running.done()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
