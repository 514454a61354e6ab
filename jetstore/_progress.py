"""Progress of uploads and downloads: rich bars (one per file with rate and ETA, plus an
overall bar for several files) on a terminal; nothing but one result line per file when
piped, so scripts can parse the output; nothing at all with ``--quiet``.

Bars go to stderr, so ``jetstore obj get S N -o - > file`` keeps its data clean.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import TracebackType
from typing import Self

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

__all__ = ["Callback", "Reporter", "reporter"]

Callback = Callable[[int, int | None], None]
"""``progress(done, total)`` as objstore calls it."""


class Reporter:
    """Plain reporting: result lines on stdout, no bars (piped output, ``--json``)."""

    def __init__(self, *, quiet: bool = False) -> None:
        self._quiet = quiet

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def transfer(self, name: str, size: int | None) -> Callback:
        """The callback for one file's transfer (``size`` None when unknown)."""
        return _ignore

    def done(self, name: str, line: str) -> None:
        """One file finished: its result line (none with ``--quiet``)."""
        if not self._quiet:
            click.echo(line)

    def failed(self, name: str, line: str) -> None:
        """One file failed: its error line, on stderr (also with ``--quiet``)."""
        click.echo(line, err=True)


def _ignore(done: int, total: int | None) -> None:
    return None


class BarReporter(Reporter):
    """Rich bars on stderr: one per file in flight, and an overall one for several files."""

    def __init__(self, files: int, total_bytes: int | None) -> None:
        super().__init__()
        self._console = Console(stderr=True)
        self._progress = Progress(
            TextColumn("[bold]{task.description}", table_column=None),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=self._console,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._files = files
        self._finished = 0
        self._tasks: dict[str, TaskID] = {}
        self._overall: TaskID | None = None
        if files > 1:
            self._overall = self._progress.add_task(self._overall_text(), total=total_bytes)

    def _overall_text(self) -> str:
        return f"total ({self._finished}/{self._files} files)"

    def __enter__(self) -> Self:
        self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._progress.stop()

    def transfer(self, name: str, size: int | None) -> Callback:
        task = self._progress.add_task(_short(name), total=size)
        self._tasks[name] = task
        last = [0]

        def update(done: int, total: int | None) -> None:
            self._progress.update(task, completed=done, total=total)
            if self._overall is not None:
                self._progress.advance(self._overall, done - last[0])
            last[0] = done

        return update

    def _close(self, name: str) -> None:
        task = self._tasks.pop(name, None)
        if task is not None and self._files > 1:
            self._progress.remove_task(task)  # many files: keep only the bars in flight
        self._finished += 1
        if self._overall is not None:
            self._progress.update(self._overall, description=self._overall_text())

    def done(self, name: str, line: str) -> None:
        self._close(name)
        if sys.stdout.isatty():
            self._progress.console.print(line, markup=False, highlight=False)
        else:  # results stay parseable on stdout; the bars live on stderr
            click.echo(line)

    def failed(self, name: str, line: str) -> None:
        self._close(name)
        self._progress.console.print(line, markup=False, highlight=False, style="red")


def _short(name: str, width: int = 32) -> str:
    return name if len(name) <= width else "…" + name[-(width - 1) :]


def reporter(*, quiet: bool, json: bool, files: int, total_bytes: int | None) -> Reporter:
    """Bars when stderr is a terminal (and neither ``--quiet`` nor ``--json``), else plain."""
    if quiet or json or not sys.stderr.isatty():
        return Reporter(quiet=quiet or json)
    return BarReporter(files, total_bytes)
