"""Every ```python block of the README runs as written: whole programs in a subprocess,
fragments in order against the fixtures' server, the Spark block as a job of its own, the
venv off PATH (tests/docs/test_spark_job_with_the_venv_off_path.py).
(docs/*.md: tests/docs/test_doc_snippets.py.)"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import jetstream
from tests.readme import python_blocks, run_fragments, snippet_world

BLOCKS = python_blocks()


def test_the_readme_has_the_blocks_these_tests_run() -> None:
    assert sum(b.is_program for b in BLOCKS) == 1
    assert sum(b.needs_spark for b in BLOCKS) == 1
    assert len(BLOCKS) >= 5


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
    """What the fragments assume (tests/readme.py), in a working directory of its own."""
    monkeypatch.chdir(tmp_path)
    async with snippet_world(js, tmp_path) as world:
        yield world


async def test_fragments_run_in_order(readme_world: dict[str, object]) -> None:
    fragments = [b for b in BLOCKS if not b.is_program and not b.needs_spark]
    await run_fragments(fragments, readme_world)
    assert (Path.cwd() / "out.bin").read_bytes() == (Path.cwd() / "path/to/model.bin").read_bytes()
