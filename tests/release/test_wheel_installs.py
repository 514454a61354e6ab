"""The release a user installs: ``python -m build`` makes an sdist and, from it, a wheel that
holds every module and data file of the packages and the license; the wheel, installed with
its declared dependencies into a fresh virtualenv, runs the README's demo from a directory
that is not this checkout, and the ``jetstore`` command reports the project's version."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("jetstream", "kvstore", "objstore", "pcgroups", "jetstore")
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

# Building runs setuptools in an isolated environment and installing resolves the wheel's
# dependencies from the machine's package index (pip's cache makes both quick after once).
pytestmark = pytest.mark.timeout(600)


def _run(command: list[str | Path], cwd: Path, **kwargs: object) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=_outside_env(), capture_output=True, text=True, check=False,
        timeout=540, **kwargs,  # type: ignore[call-overload]
    )  # fmt: skip
    assert done.returncode == 0, f"{command}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return str(done.stdout)


def _outside_env() -> dict[str, str]:
    """The environment of a user's shell: nothing pointing into this checkout or its venv."""
    hidden = ("PYTHONPATH", "VIRTUAL_ENV", "NATS_URL", "NATS_SERVER_BIN")
    return {k: v for k, v in os.environ.items() if k not in hidden}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel built from it, as ``python -m build`` makes them for release."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", out, ROOT], cwd=out)
    return out


@pytest.fixture(scope="module")
def wheel(dist: Path) -> Path:
    (built,) = dist.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh virtualenv with the wheel (and its ``cli`` extra) installed from the index."""
    venv = tmp_path_factory.mktemp("venv")
    # No pip of its own (ensurepip takes longer than the install): this venv's pip installs
    # into it, resolving the wheel's dependencies from the index, as `pip install` would.
    _run([sys.base_prefix + "/bin/python3", "-m", "venv", "--without-pip", venv], cwd=venv)
    pip = [sys.executable, "-m", "pip", "--python", venv / "bin" / "python"]
    _run([*pip, "install", "-q", f"{wheel}[cli]"], cwd=venv)
    yield venv


def _source_files() -> set[str]:
    """The package files git tracks: what the wheel must hold (tests and tools aside)."""
    listed = subprocess.run(
        ["git", "ls-files", *PACKAGES, "pyspark_*.py"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return set(listed)


def test_the_wheel_holds_every_module_and_data_file_of_the_packages(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert _source_files() - names == set()
    assert {f"{package}/py.typed" for package in PACKAGES} <= names  # typed for mypy users
    assert f"jetstore-{VERSION}.dist-info/licenses/LICENSE" in names


def test_the_sdist_carries_the_license_and_the_readme(dist: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    assert sdist.name == f"jetstore-{VERSION}.tar.gz"
    listing = _run(["tar", "tzf", sdist], cwd=dist).split()
    assert {f"jetstore-{VERSION}/LICENSE", f"jetstore-{VERSION}/README.md"} <= set(listing)


def test_the_installed_wheel_runs_the_readme_demo(installed: Path, tmp_path: Path) -> None:
    """The demo of the README's quick start (examples/quickstart.py, which starts the
    nats-server of the nats-server-bin dependency), run by the fresh venv's Python from a
    directory of its own: the packages it imports are the installed ones."""
    demo = tmp_path / "quickstart.py"
    demo.write_bytes((ROOT / "examples" / "quickstart.py").read_bytes())
    python = installed / "bin" / "python"
    where = _run([python, "-c", "import jetstream, kvstore; print(kvstore.__file__)"], tmp_path)
    assert where.startswith(str(installed)), where
    out = _run([python, demo.name], cwd=tmp_path)
    assert "using an embedded nats-server" in out
    assert "get alice.name -> 'Alice Liddell'" in out


def test_the_installed_command_reports_the_release_version(installed: Path) -> None:
    out = _run([installed / "bin" / "jetstore", "--version"], cwd=installed)
    assert out.split() == ["jetstore,", "version", VERSION]


def test_the_version_is_the_changelogs_latest_release() -> None:
    """What is built is what CHANGELOG.md describes last (not a development version)."""
    changelog = (ROOT / "CHANGELOG.md").read_text()
    releases = [line for line in changelog.splitlines() if line.startswith("## [")]
    assert releases[0] == "## [Unreleased]"
    assert releases[1].startswith(f"## [{VERSION}] - ")
