"""Cost curves: how KV operations and object transfers scale with size.

    python -m benchmarks.curves                         # 10k/100k/1M keys, 1..1024 MiB (minutes)
    python -m benchmarks.curves --keys 1000 --objects 1 --json /tmp/curves.json
    python -m benchmarks.curves --plot benchmarks/curves.json --png benchmarks/curves.png

Each key count gets a fresh embedded server (file storage) and a fresh bucket of 100-byte
values; the objects share one server, a fresh store per size. Every operation runs in a fresh
child process, which reads its peak RSS (``VmHWM``) right before the operation and after it: the
growth is what the operation cost the client in memory, whatever the process held before
(interpreter, imports, connection). The run writes the raw numbers as JSON; ``--plot`` reads that
JSON back and draws the curves (a separate step, so a plot can be redrawn without re-measuring).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jetstream
import kvstore
import objstore

from ._harness import machine
from .rss import _peak_mib

BUCKET = "curves"
VALUE = b"v" * 100
BATCH = 1000
"""Keys per atomic ``put_many`` (the server's default ``max_batch_size``)."""
GET_KEYS = 10_000
"""Keys per ``get_many``, spread over the bucket."""
DELETED_SHARE = 10
"""Every tenth key is deleted before ``purge_deletes``."""
MIB = 1024 * 1024

KEY_SIZES = [10_000, 100_000, 1_000_000]
OBJECT_SIZES = [1, 16, 128, 1024]
KV_OPS = ["put_many", "watch", "keys", "get_many", "status", "delete", "purge_deletes"]
"""In run order: each works on what the ones before left in the bucket."""
OBJECT_OPS = ["obj_put", "obj_get"]
LABELS = {
    "put_many": "put_many (batches of 1000)",
    "watch": "watch snapshot (all keys)",
    "keys": "keys()",
    "get_many": "get_many (10k keys)",
    "status": "status()",
    "delete": "delete 10% (batches of 1000)",
    "purge_deletes": "purge_deletes (10% tombstones)",
    "obj_put": "object put from a file",
    "obj_get": "object open() streamed",
}


@dataclass
class Row:
    """One operation at one size, measured in its own process."""

    op: str
    size: int
    """Keys in the bucket, or MiB of the object."""
    items: int
    """What the rate counts: keys handled, or MiB."""
    unit: str
    seconds: float
    rss_before_mib: float
    rss_peak_mib: float

    @property
    def growth_mib(self) -> float:
        return self.rss_peak_mib - self.rss_before_mib


# -- the operations, each run in a child process ---------------------------------------------


def _key(i: int) -> str:
    return f"k{i}"


async def _put_many(bucket: kvstore.Bucket, size: int) -> int:
    for start in range(0, size, BATCH):  # each batch built when sent: the input is not measured
        await bucket.put_many({_key(i): VALUE for i in range(start, min(start + BATCH, size))})
    return size


async def _watch(bucket: kvstore.Bucket, size: int) -> int:
    count = 0
    async with bucket.watch() as watcher:
        async for _ in watcher:
            count += 1
            if count == size:
                break
    return count


async def _keys(bucket: kvstore.Bucket, size: int) -> int:
    count = 0  # counted, not collected: the listing's own memory is what is measured
    async for _ in bucket.keys():
        count += 1
    return count


async def _get_many(bucket: kvstore.Bucket, size: int) -> int:
    step = max(1, size // GET_KEYS)
    snapshot = await bucket.get_many(_key(i) for i in range(0, size, step))
    assert not snapshot.missing, snapshot.missing[:5]
    return len(snapshot)


async def _status(bucket: kvstore.Bucket, size: int) -> int:
    status = await bucket.status()
    assert status.values == size, (status.values, size)
    return 1


async def _delete(bucket: kvstore.Bucket, size: int) -> int:
    doomed = range(0, size, DELETED_SHARE)  # each batch's keys made when sent, as in put_many
    for start in range(0, len(doomed), BATCH):
        async with bucket.batch() as batch:
            for i in doomed[start : start + BATCH]:
                batch.delete(_key(i))
    return len(doomed)


async def _purge_deletes(bucket: kvstore.Bucket, size: int) -> int:
    removed = await bucket.purge_deletes(older_than=None)
    assert removed == len(range(0, size, DELETED_SHARE)), removed
    return removed


KV_ACTIONS: dict[str, Callable[[kvstore.Bucket, int], Coroutine[Any, Any, int]]] = {
    "put_many": _put_many,
    "watch": _watch,
    "keys": _keys,
    "get_many": _get_many,
    "status": _status,
    "delete": _delete,
    "purge_deletes": _purge_deletes,
}


async def _object_op(js: jetstream.JetStream, op: str, mib: int, path: str) -> int:
    store = await objstore.open_store(js, f"{BUCKET}{mib}")
    if op == "obj_put":
        await store.put("big", path)
        return mib
    received = 0
    async with store.open("big") as reader:
        async for chunk in reader:
            received += len(chunk)
    assert received == mib * MIB, received
    return mib


async def _child(url: str, op: str, size: int, path: str) -> dict[str, float]:
    async with await jetstream.connect(url) as js:
        bucket = None if op in OBJECT_OPS else await kvstore.open_bucket(js, BUCKET)
        before = _peak_mib()
        start = time.perf_counter()
        if bucket is None:
            items = await _object_op(js, op, size, path)
        else:
            items = await KV_ACTIONS[op](bucket, size)
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "items": items, "before": before, "peak": _peak_mib()}


def _run_child(url: str, op: str, size: int, path: str = "") -> Row:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.curves", "--child", url, op, str(size), path],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if out.returncode:
        raise RuntimeError(f"{op} at {size} failed:\n{out.stderr}")
    got = json.loads(out.stdout.splitlines()[-1])
    unit = "MiB" if op in OBJECT_OPS else "keys" if op != "status" else "calls"
    row = Row(op, size, int(got["items"]), unit, got["seconds"], got["before"], got["peak"])
    print(_line(row), file=sys.stderr, flush=True)
    return row


# -- the parent: servers, buckets, stores -----------------------------------------------------


def measure_keys(size: int) -> list[Row]:
    """Every KV operation on a fresh bucket of ``size`` keys on a fresh server."""
    with jetstream.EmbeddedServer() as server:

        async def create() -> None:
            async with await jetstream.connect(server.url) as js:
                await kvstore.create_bucket(js, BUCKET)

        asyncio.run(create())
        return [_run_child(server.url, op, size) for op in KV_OPS]


def measure_objects(sizes: list[int]) -> list[Row]:
    """Upload then streamed download of one object per size (random bytes from a file)."""
    rows: list[Row] = []
    with (
        jetstream.EmbeddedServer() as server,
        tempfile.TemporaryDirectory(prefix="bench-curves-") as folder,
    ):
        for mib in sizes:
            source = Path(folder) / f"{mib}.bin"
            with open(source, "wb") as file:
                for _ in range(mib):
                    file.write(os.urandom(MIB))
            asyncio.run(_store(server.url, f"{BUCKET}{mib}", create=True))
            rows += [_run_child(server.url, op, mib, str(source)) for op in OBJECT_OPS]
            asyncio.run(_store(server.url, f"{BUCKET}{mib}", create=False))  # free the disk
            source.unlink()
    return rows


async def _store(url: str, name: str, *, create: bool) -> None:
    async with await jetstream.connect(url) as js:
        if create:
            await objstore.create_store(js, name)
        else:
            await objstore.delete_store(js, name)


def run(key_sizes: list[int], object_sizes: list[int]) -> dict[str, Any]:
    """Measure every curve; the raw numbers as a JSON-ready dict."""
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = os.getloadavg()
    rows: list[Row] = []
    for size in key_sizes:
        rows += measure_keys(size)
    if object_sizes:
        rows += measure_objects(object_sizes)
    return {
        "command": "python -m benchmarks.curves " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "started": started,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "rows": [asdict(row) for row in rows],
    }


# -- reporting --------------------------------------------------------------------------------


def _line(row: Row) -> str:
    return f"{row.op} {row.size}: {row.seconds:.3f} s, +{row.growth_mib:.1f} MiB"


def load_rows(data: dict[str, Any]) -> list[Row]:
    return [Row(**row) for row in data["rows"]]


def markdown(data: dict[str, Any]) -> str:
    """The table: one line per operation and size, with how time and memory grew from the
    previous size (x time / x size: 1.0 is linear)."""
    lines = [
        "| operation | size | seconds | rate | RSS before (MiB) | peak (MiB) | growth (MiB) "
        "| time growth / size growth |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    previous: dict[str, Row] = {}
    for row in load_rows(data):
        size = f"{row.size} MiB" if row.unit == "MiB" else f"{row.size:,} keys"
        rate = f"{row.items / row.seconds:,.0f} {row.unit}/s" if row.seconds else "-"
        last = previous.get(row.op)
        scaling = "-"
        if last is not None and last.seconds:
            scaling = f"{(row.seconds / last.seconds) / (row.size / last.size):.2f}"
        lines.append(
            f"| {LABELS[row.op]} | {size} | {row.seconds:.3f} | {rate} | "
            f"{row.rss_before_mib:.0f} | {row.rss_peak_mib:.0f} | {row.growth_mib:.1f} "
            f"| {scaling} |"
        )
        previous[row.op] = row
    return "\n".join(lines)


def plot(data: dict[str, Any], png: Path) -> None:
    """Draw time and client peak-RSS growth against size (log-log), KV and objects."""
    import matplotlib  # the 'bench' extra; only the plot step needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = load_rows(data)
    figure, axes = plt.subplots(2, 2, figsize=(13, 9))
    for column, (ops, xlabel) in enumerate(
        ((KV_OPS, "keys in the bucket"), (OBJECT_OPS, "object size (MiB)"))
    ):
        for op in ops:
            mine = sorted((r for r in rows if r.op == op), key=lambda r: r.size)
            if not mine:
                continue
            sizes = [r.size for r in mine]
            axes[0][column].plot(sizes, [r.seconds for r in mine], "o-", label=LABELS[op])
            axes[1][column].plot(
                sizes, [max(r.growth_mib, 0.1) for r in mine], "o-", label=LABELS[op]
            )
        for row_no, ylabel in enumerate(("seconds", "client peak RSS growth (MiB, 0 at 0.1)")):
            ax = axes[row_no][column]
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(True, which="both", alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=7)
    axes[0][0].set_title("KV: time (a slope of 1 is linear)")
    axes[0][1].set_title("Objects: time")
    axes[1][0].set_title("KV: client memory, each operation in a fresh process")
    axes[1][1].set_title("Objects: client memory")
    figure.suptitle(f"{data['machine']}\n{data['started']}", fontsize=8)
    figure.tight_layout()
    figure.savefig(png, dpi=90)
    plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.curves", description=__doc__)
    parser.add_argument("--keys", type=int, nargs="*", default=KEY_SIZES)
    parser.add_argument("--objects", type=int, nargs="*", default=OBJECT_SIZES, help="MiB")
    parser.add_argument("--json", type=Path, default=Path("benchmarks/curves.json"))
    parser.add_argument("--plot", type=Path, help="draw this JSON (measures nothing)")
    parser.add_argument("--png", type=Path, default=Path("benchmarks/curves.png"))
    args = parser.parse_args(argv)
    if args.plot:
        data = json.loads(args.plot.read_text())
        plot(data, args.png)
        print(markdown(data))
        return
    data = run(args.keys, args.objects)
    args.json.write_text(json.dumps(data, indent=1) + "\n")
    print(markdown(data))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        url, op, size, path = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
        print(json.dumps(asyncio.run(_child(url, op, size, path))))
    else:
        main()
