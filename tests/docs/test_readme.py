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
from tests.readme import README, Block, programs, python_blocks, run_fragment, run_whole

BLOCKS = python_blocks()
RUNS = programs([README])


def test_the_tour_is_a_program_and_fragments_that_name_it() -> None:
    (tour,) = [fragments for whole, fragments in RUNS if whole.heading == "A bucket"]
    assert len(tour) >= 3
    assert all(b.is_program or b.needs_spark or b in tour for b in BLOCKS)


@pytest.mark.parametrize(("program", "fragments"), RUNS, ids=lambda b: getattr(b, "heading", ""))
def test_the_programs_run_as_written(
    program: Block, fragments: list[Block], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run_whole(program, fragments)


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
