"""Running the ``jetstore`` command as a user would: a subprocess (``python -m jetstore``) of
this checkout, with its output, exit code and how long it took."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI subprocess: this checkout first on the path, no NATS_URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NATS_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


@dataclasses.dataclass
class Run:
    code: int
    out: bytes
    err: str
    seconds: float

    @property
    def text(self) -> str:
        return self.out.decode()


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "jetstore", *args]


def jetstore(
    *args: str,
    stdin: bytes | None = None,
    cwd: Path | None = None,
    timeout: float = 60,
    env: dict[str, str] | None = None,
) -> Run:
    """Run ``jetstore ARGS`` to its end (stdin, stdout and stderr are pipes)."""
    started = time.monotonic()
    done = subprocess.run(
        cli_command(*args),
        input=stdin if stdin is not None else b"",
        capture_output=True,
        cwd=cwd or ROOT,
        env=env or cli_env(),
        timeout=timeout,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr.decode(), time.monotonic() - started)


def jetstore_all(*calls: tuple[str, ...], workers: int = 4) -> list[Run]:
    """Run independent invocations side by side (each is a process start: this keeps the
    test time down); results in the order given."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda args: jetstore(*args), calls))


def close_process(process: subprocess.Popen[bytes]) -> None:
    """Kill ``process`` if it still runs, reap it and close its pipes."""
    if process.poll() is None:
        process.kill()
    process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None and not stream.closed:
            with contextlib.suppress(BrokenPipeError):
                stream.close()


def assert_no_traceback(err: str) -> None:
    """The verb's stderr shows neither a traceback nor the unexpected-error line."""
    assert "Traceback" not in err, err
    assert "(a bug? --debug shows where)" not in err, err


def jetstore_here(*args: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> Run:
    """Run ``jetstore ARGS`` in this process (click's runner: no interpreter to start), with
    stdin, stdout and stderr as pipes, no ``NATS_*`` variable but those of ``env``, and the
    logging setup the verb changes (root handlers, level, level names) put back."""
    import logging

    from click.testing import CliRunner

    from jetstore._app import main

    unset: dict[str, str | None] = {name: None for name in os.environ if name.startswith("NATS_")}
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    code = 0
    started = time.monotonic()
    try:
        with CliRunner().isolation(input=stdin, env={**unset, **(env or {})}) as (out, err, _):
            try:
                main(list(args))
            except SystemExit as end:
                code = end.code if isinstance(end.code, int) else 0
    finally:
        root.handlers[:], root.level = handlers, level
    return Run(code, out.getvalue(), err.getvalue().decode(), time.monotonic() - started)
