"""Rich progress bars on stderr: one per file in flight (name, bar, bytes, rate, ETA) and an
overall bar for several files. Imported only when bars are drawn (a terminal)."""

from __future__ import annotations

import sys
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

from ._progress import Callback, Reporter
from ._shown import shown

__all__ = ["BarReporter"]


class BarReporter(Reporter):
    """Rich bars on stderr: one per file in flight, and an overall one for several files."""

    def __init__(self, files: int, total_bytes: int | None) -> None:
        super().__init__()
        self._console = Console(stderr=True)
        self._progress = Progress(
            # Names are anyone's text: "weird[/x].txt" is not markup (rich raised on it).
            TextColumn("{task.description}", style="bold", markup=False, table_column=None),
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
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.stop()

    def transfer(self, name: str, size: int | None) -> Callback:
        task = self._progress.add_task(_short(shown(name)), total=size)
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
            self._print(line)
        else:  # results stay parseable on stdout; the bars live on stderr
            click.echo(shown(line))

    def failed(self, name: str, line: str) -> None:
        self._close(name)
        self._print(line, style="red")

    def _print(self, line: str, style: str | None = None) -> None:
        # Lines hold anyone's names: escaped, and no markup ("weird[/x].txt" made rich raise),
        # no ":smile:" emoji codes, no highlighting.
        console = self._progress.console
        console.print(shown(line), style=style, markup=False, emoji=False, highlight=False)


def _short(name: str, width: int = 32) -> str:
    return name if len(name) <= width else "…" + name[-(width - 1) :]
