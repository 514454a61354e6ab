"""Every ```python block of the README runs as written: "A bucket" is a whole program and the
tour's other blocks are fragments of it, each saying so on its first line; they run in its
place for them, in order. The Spark block runs in the test session.
(docs/*.md: tests/docs/test_doc_snippets.py.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import jetstream
import kvstore
from tests.readme import README, programs, python_blocks, run_fragment, run_whole

BLOCKS = python_blocks()


def test_every_block_is_a_program_or_says_which_one_it_belongs_to() -> None:
    for block in BLOCKS:
        if block.needs_spark:
            continue  # the Spark section's block: test_the_spark_block_runs
        assert block.is_program or block.whole == (README, "A bucket"), (
            f"{block.where}: neither a program nor marked '# inside main() of \"A bucket\"'"
        )
    assert sum(b.whole is not None for b in BLOCKS) >= 3


def test_the_tour_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (run,) = programs([README])
    run_whole(*run)
    assert (tmp_path / "out.bin").is_file()


@pytest.mark.spark
def test_the_spark_block_runs(spark: object, nats_server: jetstream.EmbeddedServer) -> None:
    (block,) = [b for b in BLOCKS if b.needs_spark]
    namespace: dict[str, object] = {"spark": spark, "url": nats_server.url}

    async def bucket(make: bool) -> None:
        async with await jetstream.connect(nats_server.url) as js:
            if make:  # the block says the bucket exists
                await kvstore.create_bucket(js, "profiles")
            else:
                await kvstore.delete_bucket(js, "profiles")

    asyncio.run(bucket(make=True))
    try:
        asyncio.run(run_fragment(block, namespace))
        assert sorted(r["key"] for r in namespace["users"].collect()) == ["user.1", "user.2"]  # type: ignore[attr-defined]
    finally:
        asyncio.run(bucket(make=False))
