"""Every example runs, with an embedded server when NATS_URL is unset and against NATS_URL
when it is set. examples/spark_pipeline.py and examples/spark_streaming.py run in the Spark job
of tests/docs/test_spark_job_with_the_venv_off_path.py (one Spark start for them and the
README's Spark block)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import jetstream

ROOT = Path(__file__).parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
RUN_ELSEWHERE = {
    "spark_pipeline.py": "test_spark_job_with_the_venv_off_path.py",
    "spark_streaming.py": "test_spark_job_with_the_venv_off_path.py",
}


def _run(script: Path, env: dict[str, str]) -> str:
    # The packages of this checkout, not whichever one the venv's editable install points at
    # (a script's own directory comes first on sys.path, the working directory not at all).
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))}
    result = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_examples_run_elsewhere_are_run_there() -> None:
    for example, test in RUN_ELSEWHERE.items():
        assert (ROOT / "examples" / example).exists(), example
        assert example in (Path(__file__).parent / test).read_text(), test


@pytest.mark.parametrize(
    "script", [p for p in EXAMPLES if p.name not in RUN_ELSEWHERE], ids=lambda p: p.name
)
def test_example_runs_with_an_embedded_server(script: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NATS_URL"}
    out = _run(script, env)
    assert "embedded nats-server at nats://127.0.0.1:" in out


def test_quickstart_uses_nats_url_when_set(nats_server: jetstream.EmbeddedServer) -> None:
    out = _run(EXAMPLES[0].with_name("quickstart.py"), {**os.environ, "NATS_URL": nats_server.url})
    assert f"using the NATS server at {nats_server.url}" in out
    assert "stale update refused" in out and "after its TTL" in out


def test_consumer_groups_example_survives_the_kill(nats_server: jetstream.EmbeddedServer) -> None:
    script = EXAMPLES[0].with_name("consumer_groups.py")
    out = _run(script, {**os.environ, "NATS_URL": nats_server.url})
    assert f"using the NATS server at {nats_server.url}" in out
    assert "killed worker-2" in out and "started a new worker-2" in out
    assert "all 360 orders processed" in out and "every customer's orders in order" in out


def test_sync_quickstart_uses_no_async_and_shares_one_handle(
    nats_server: jetstream.EmbeddedServer,
) -> None:
    script = EXAMPLES[0].with_name("sync_quickstart.py")
    out = _run(script, {**os.environ, "NATS_URL": nats_server.url})
    assert "stale update refused" in out
    assert "100 puts from 8 threads: 100 distinct revisions" in out
    assert "watched: alice.city = Lyon (PUT)" in out and "from a running loop: Lyon" in out
    assert "stored report.txt: 6000 bytes; read back 6000" in out
