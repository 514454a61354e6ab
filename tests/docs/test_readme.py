"""Every ```python block of the README runs as written: "A bucket" is a whole program and the
tour's other blocks are fragments of it, each saying so on its first line; they run in its
place for them, in order. The Spark block runs as a job of its own, with the venv off PATH
(tests/docs/test_spark_job_with_the_venv_off_path.py).
(docs/*.md: tests/docs/test_doc_snippets.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.readme import README, Block, programs, python_blocks, run_whole

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
