"""Peak memory of a large upload and download, each in a fresh process.

    python -m benchmarks.rss 1024      # MiB; prints a markdown table

Each child measures its peak RSS (``VmHWM``) before and after its operation; the growth is what the
transfer cost in memory (the object itself is on disk, never in memory as a whole).
"""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jetstream
import objstore

STORE = "bench_rss"


def _peak_mib() -> float:
    """This process's peak resident memory. ``VmHWM`` belongs to the address space, so unlike
    ``ru_maxrss`` (kept across exec) it does not inherit the parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _child(url: str, action: str, path: str) -> None:
    async with await jetstream.connect(url) as js:
        store = await objstore.open_store(js, STORE)
        before = _peak_mib()
        start = time.perf_counter()
        if action == "put":
            await store.put("big", path)
        else:
            await store.get_file("big", path)
        elapsed = time.perf_counter() - start
        size = Path(path).stat().st_size / (1024 * 1024)  # noqa: ASYNC240 (after the timing)
        print(f"{before:.1f} {_peak_mib():.1f} {size / elapsed:.0f}")


def measure(mib: int) -> str:
    """Run an upload and a download of ``mib`` MiB in child processes; a markdown table."""
    folder = Path(tempfile.mkdtemp(prefix="bench-rss-"))
    source = folder / "source.bin"
    with open(source, "wb") as file:
        for _ in range(mib):
            file.write(os.urandom(1024 * 1024))
    rows = []
    with jetstream.EmbeddedServer() as server:

        async def create() -> None:
            async with await jetstream.connect(server.url) as js:
                await objstore.create_store(js, STORE)

        asyncio.run(create())
        for action, path in (("put", source), ("get", folder / "copy.bin")):
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.rss", "--child", server.url, action, str(path)],
                capture_output=True, text=True, check=True,
            ).stdout.split()  # fmt: skip
            before, peak, rate = float(out[0]), float(out[1]), out[2]
            rows.append(
                f"| {action} {mib} MiB from/to a file | {before:.0f} | {peak:.0f} | "
                f"{peak - before:.1f} | {rate} |"
            )
    (folder / "copy.bin").unlink(missing_ok=True)
    source.unlink()
    header = (
        "| operation | RSS before (MiB) | peak RSS (MiB) | growth (MiB) | MiB/s |\n"
        "|---|---:|---:|---:|---:|"
    )
    return "\n".join([header, *rows])


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        asyncio.run(_child(*sys.argv[2:5]))
    else:
        print(measure(int(sys.argv[1])))
