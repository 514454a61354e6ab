"""A Spark job as a new user runs one: ``pip install -e .`` (the README's install) into a venv,
then ``/path/.venv/bin/python job.py`` with that venv not on PATH, ``PYSPARK_PYTHON`` unset and
no ``register`` call. The job is the README's Spark block followed by
examples/spark_pipeline.py and examples/spark_streaming.py, in one process and one JVM (a
Spark start is the dearest thing in a test)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

import jetstream
import kvstore
from tests.readme import python_blocks
from tests.spark.spark_session import submit_args

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "spark_pipeline.py"
STREAMING = ROOT / "examples" / "spark_streaming.py"

pytestmark = pytest.mark.spark

# Loopback only, no UI: pyspark's launcher options, so the README's block runs as written.
SUBMIT_ARGS = submit_args(
    "--master local[1] --conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false",
    "--conf spark.driver.host=127.0.0.1 --conf spark.driver.bindAddress=127.0.0.1",
)


def _packages() -> list[str]:
    """The top-level packages pyproject.toml installs (its ``packages.find`` patterns): a copy
    without one of them fails to install or to import."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({pattern.rstrip("*").split(".")[0] for pattern in patterns})


def _editable_install(tmp_path: Path) -> tuple[Path, Path]:
    """A venv with this checkout's files installed by ``pip install -e`` (its dependencies
    from the test venv's site-packages, through a path entry): (its python, the source)."""
    source = tmp_path / "src"
    files = subprocess.run(
        ["git", "ls-files", *_packages(), "pyspark_*.py", "README.md"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    for file in [*files, "pyproject.toml"]:  # pyproject as in the work tree
        (source / file).parent.mkdir(parents=True, exist_ok=True)
        (source / file).write_bytes((ROOT / file).read_bytes())
    venv = tmp_path / "venv"
    subprocess.run([sys.base_prefix + "/bin/python3", "-m", "venv", "--without-pip", str(venv)],
                   check=True)  # fmt: skip
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    here = subprocess.run(
        [sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "deps.pth").write_text(here + "\n")  # pyspark, nats-py: not jetstore
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps",
         "-e", source],
        check=True, capture_output=True,
    )  # fmt: skip
    return python, source


def _environment_of_a_new_shell() -> dict[str, str]:
    """This environment without the venvs on PATH, without the test session's Spark settings
    (``PYSPARK_PYTHON``, its ``PYTHONPATH``) and without ``NATS_URL``."""
    venv_bin = os.path.dirname(sys.executable)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin]
    dropped = {"PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "NATS_URL"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    return {**env, "PATH": os.pathsep.join(path), "PYSPARK_SUBMIT_ARGS": SUBMIT_ARGS,
            "SPARK_LOCAL_IP": "127.0.0.1"}  # fmt: skip


@pytest.mark.timeout(420)  # a venv, an install, a Spark start and a dozen jobs
def test_the_readme_spark_block_and_the_spark_example_run_with_the_venv_off_path(
    nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """Was DATA_SOURCE_NOT_FOUND (or ``No module named 'kvstore'``) in a Java trace: Spark ran
    its Python workers with ``python3`` from PATH, which lacks the library. Also what an
    editable install must give: Spark's lookup of ``pyspark_*`` modules finds the formats
    (setuptools' import hook, which pkgutil.iter_modules() does not see, did not)."""
    (block,) = [b for b in python_blocks() if b.needs_spark]

    async def bucket(make: bool) -> None:
        async with await jetstream.connect(nats_server.url) as js:
            if make:  # the block says the bucket exists
                await kvstore.create_bucket(js, "profiles")
            else:
                await kvstore.delete_bucket(js, "profiles")

    python, source = _editable_install(tmp_path)
    job = tmp_path / "job.py"
    job.write_text(
        textwrap.dedent(f"""
        import runpy
        url = {nats_server.url!r}
        exec(compile({block.code!r}, "README.md:{block.line}", "exec"))
        print("ROWS", sorted((r.key, r.value) for r in users.collect()))
        import kvstore
        print("FROM", kvstore.__file__)
        runpy.run_path({str(EXAMPLE)!r}, run_name="__main__")
        runpy.run_path({str(STREAMING)!r}, run_name="__main__")
        """)
    )
    asyncio.run(bucket(make=True))
    try:
        done = subprocess.run(
            [python, job],
            cwd=tmp_path,
            env=_environment_of_a_new_shell(),
            capture_output=True,
            text=True,
            timeout=400,
        )
    finally:
        asyncio.run(bucket(make=False))
    assert done.returncode == 0, done.stderr[-6000:]
    assert "ROWS [('user.1', b'Ada'), ('user.2', b'Grace')]" in done.stdout
    assert f"FROM {source}" in done.stdout
    for line in ("embedded nats-server at nats://127.0.0.1:", "wrote 2000 keys",
                 "uploaded 7 reports", "objects in 'reports': 7",
                 "watched order.3 = - (DELETE", "query stopped after micro-batch 2",
                 "10 events, 10 changes watched: every event stored once"):  # fmt: skip
        assert line in done.stdout, done.stdout
