"""Every ```python block of the README runs as written: whole programs in a subprocess,
fragments in order against the fixtures' server, the Spark block in the test session."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

import jetstream
import kvstore
import objstore
from tests.readme import python_blocks, run_fragment

BLOCKS = python_blocks()


def test_the_readme_has_the_blocks_these_tests_run() -> None:
    assert sum(b.is_program for b in BLOCKS) == 1
    assert sum(b.needs_spark for b in BLOCKS) == 1
    assert len(BLOCKS) >= 6


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.is_program], ids=lambda b: b.heading)
def test_whole_programs_run(block: object) -> None:
    result = subprocess.run(
        [sys.executable, "-c", block.code],  # type: ignore[attr-defined]
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


@pytest.fixture
async def readme_world(
    js: jetstream.JetStream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[dict[str, object]]:
    """What the fragments assume: a connection, a bucket, an ORDERS stream with orders, a file
    to upload, and a working directory to download into. Removed afterwards."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "path" / "to").mkdir(parents=True)
    (tmp_path / "path" / "to" / "model.bin").write_bytes(os.urandom(300_000))
    await js.add_stream(jetstream.StreamConfig(name="ORDERS", subjects=["orders.>"]))
    for subject in ("orders.new", "orders.paid", "orders.packed", "orders.shipped"):
        await js.publish(subject, b"{}")
    bucket = await kvstore.create_bucket(js, "profiles", history=5)
    try:
        yield {
            "asyncio": asyncio,
            "timedelta": timedelta,
            "jetstream": jetstream,
            "kvstore": kvstore,
            "objstore": objstore,
            "js": js,
            "bucket": bucket,
        }
    finally:
        for remove in (
            js.delete_stream("ORDERS"),
            kvstore.delete_bucket(js, "profiles"),
            kvstore.delete_bucket(js, "people"),
            objstore.delete_store(js, "artifacts"),
        ):
            with contextlib.suppress(jetstream.JetStreamError):
                await remove


async def test_fragments_run_in_order(readme_world: dict[str, object]) -> None:
    fragments = [b for b in BLOCKS if not b.is_program and not b.needs_spark]
    for block in fragments:
        try:
            await asyncio.wait_for(run_fragment(block, readme_world), timeout=60)
        except BaseException as exc:
            raise AssertionError(f"README.md:{block.line} ({block.heading}) failed") from exc
    assert (Path.cwd() / "out.bin").read_bytes() == (Path.cwd() / "path/to/model.bin").read_bytes()


@pytest.mark.spark
def test_the_spark_block_runs(spark: object, nats_server: jetstream.EmbeddedServer) -> None:
    (block,) = [b for b in BLOCKS if b.needs_spark]
    namespace: dict[str, object] = {"spark": spark, "url": nats_server.url}
    try:
        asyncio.run(run_fragment(block, namespace))
        assert namespace["users"].count() == 2  # type: ignore[attr-defined]
        (row,) = namespace["results"].collect()  # type: ignore[attr-defined]
        assert row["error"] is None and row["size"] == len(b"day,sales\n1,42\n")
        assert [r["name"] for r in namespace["objects"].collect()] == ["q3.csv"]  # type: ignore[attr-defined]
    finally:

        async def remove() -> None:
            async with await jetstream.connect(nats_server.url) as js:
                for removal in (
                    kvstore.delete_bucket(js, "profiles"),
                    objstore.delete_store(js, "reports"),
                ):
                    with contextlib.suppress(jetstream.JetStreamError):
                        await removal

        asyncio.run(remove())
