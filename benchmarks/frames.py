"""The protocol reader alone: microseconds per delivery frame for nats-py's ``Parser`` and
our ``FrameParser`` (routed frames, and frames handed back to nats-py), on frames shaped like
a watch's deliveries from a ``put_many`` bucket, fed in 32 KiB reads as nats-py's read loop
does. No server: this is the CPU cost of cutting frames, nothing else.

    python -m benchmarks.frames [--frames N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from nats.protocol.parser import Parser

from jetstream._transport.frames import FrameParser

READ_SIZE = 32_768  # nats-py's DEFAULT_BUFFER_SIZE


def watch_frames(count: int) -> bytes:
    """``count`` HMSG frames: a key subject, an ack reply, batch headers, a 100-byte value."""
    frames = []
    for i in range(count):
        headers = b"NATS/1.0\r\nNats-Batch-Id: 5Zm3m0lXJZ3n2Ps5s0aYzq\r\n"
        headers += b"Nats-Batch-Sequence: %d\r\n\r\n" % (i % 1000 + 1)
        reply = b"$JS.ACK.KV_bench.Vq3cBlXJcd9x2.1.%d.%d.1763900000000000000.%d" % (
            i + 1,
            i + 1,
            count - i - 1,
        )
        size = len(headers) + 100
        frames.append(
            b"HMSG $KV.bench.k%d 7 %s %d %d\r\n%s%s\r\n"
            % (i, reply, len(headers), size, headers, b"v" * 100)
        )
    return b"".join(frames)


class _Sink:
    """The client side: counts what it is handed."""

    def __init__(self) -> None:
        self.frames = 0
        self.stats = {"in_msgs": 0, "in_bytes": 0}

    async def _process_msg(self, *frame: Any) -> None:
        self.frames += 1

    def on_frame(self, *frame: Any) -> None:
        self.frames += 1


async def _time(make: Any, data: bytes) -> float:
    sink = _Sink()
    parser = make(sink)
    start = time.perf_counter()
    for offset in range(0, len(data), READ_SIZE):
        await parser.parse(data[offset : offset + READ_SIZE])
    return (time.perf_counter() - start) / sink.frames


def measure(count: int, rounds: int) -> str:
    data = watch_frames(count)
    variants = {
        "nats-py Parser": Parser,
        "FrameParser, routed": lambda sink: FrameParser(sink, {7: sink.on_frame}),
        "FrameParser, handed to nats-py": lambda sink: FrameParser(sink, {}),
    }
    timings: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):  # interleaved
        for name, make in variants.items():
            timings[name].append(asyncio.run(_time(make, data)))
    base = statistics.median(timings["nats-py Parser"])
    lines = [
        f"{count:,} watch frames in 32 KiB reads, median of {rounds} interleaved rounds:",
        "",
        "| reader | µs per frame | vs nats-py |",
        "|---|---:|---:|",
    ]
    for name, values in timings.items():
        median = statistics.median(values)
        lines.append(f"| {name} | {median * 1e6:.2f} | {base / median:.2f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(measure(args.frames, args.rounds))
