"""The README's command-line tour runs as written: each line of its ``sh`` block through bash,
in order, against a server of its own (the tour names its buckets), with the files it reads
in the working directory. The tour's watch runs until Ctrl-C; here it runs for a few seconds
and must have printed the values written before it."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import jetstream
from tests.cli.cli_helpers import ROOT, cli_env

pytestmark = pytest.mark.integration


def _tour() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("### Command line", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line.split(" #", 1)[0].strip() for line in block.splitlines()]
    return [line for line in lines if line]


def _inputs(cwd: Path) -> None:
    (cwd / "token.txt").write_text("s3cret")
    records = [{"key": "bob.name", "value": "Bob"}, {"key": "bob.city", "value": "Oslo"}]
    (cwd / "people.jsonl").write_text("\n".join(map(json.dumps, records)) + "\n")
    (cwd / "build").mkdir()
    payload = b"hello from the tour\n"
    with tarfile.open(cwd / "build" / "app.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    (cwd / "build" / "notes.txt").write_text("notes")


def test_the_readme_tour_runs(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "jetstore"  # what the console script does, for this checkout
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m jetstore "$@"\n')
    wrapper.chmod(0o755)
    cwd = tmp_path / "work"
    cwd.mkdir()
    _inputs(cwd)
    tour = _tour()
    assert tour[0].startswith("jetstore server") and tour[1].startswith("export NATS_URL")
    with jetstream.EmbeddedServer() as server:  # the tour's own server line, on a free port
        env = cli_env(NATS_URL=server.url, PATH=f"{bin_dir}:{cli_env()['PATH']}")
        for line in tour[2:]:
            watching = " watch " in line
            command = f"timeout 5 {line}" if watching else line
            done = subprocess.run(
                ["bash", "-o", "pipefail", "-c", command],
                cwd=cwd,
                env=env,
                capture_output=True,
                timeout=60,
                check=False,
            )
            if watching:
                assert done.returncode == 124, done.stderr  # still watching when stopped
                assert b"alice.name" in done.stdout and b"Alice" in done.stdout
            else:
                assert done.returncode == 0, f"{line}: {done.stderr.decode()}"
    assert (cwd / "hello.txt").read_text() == "hello from the tour\n"
    assert (cwd / "restore" / "v1" / "notes.txt").read_text() == "notes"
