"""Progress of uploads and downloads: rich bars (one per file with rate and ETA, plus an
overall bar for several files) on a terminal; nothing but one result line per file when
piped, so scripts can parse the output; nothing at all with ``--quiet``.

Bars go to stderr, so ``jetstore obj get S N -o - > file`` keeps its data clean.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Self

import click

from ._shown import shown

__all__ = ["Callback", "Reporter"]

Callback = Callable[[int, int | None], None]
"""``progress(done, total)`` as objstore calls it."""


class Reporter:
    """Plain reporting: result lines on stdout, no bars (piped output, ``--json``)."""

    def __init__(self, *, quiet: bool = False) -> None:
        self._quiet = quiet

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def transfer(self, name: str, size: int | None) -> Callback:
        """The callback for one file's transfer (``size`` None when unknown)."""
        return _ignore

    def done(self, name: str, line: str) -> None:
        """One file finished: its result line (none with ``--quiet``), names escaped."""
        if not self._quiet:
            click.echo(shown(line))

    def failed(self, name: str, line: str) -> None:
        """One file failed: its error line, on stderr (also with ``--quiet``)."""
        click.echo(shown(line), err=True)


def _ignore(done: int, total: int | None) -> None:
    return None
