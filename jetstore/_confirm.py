"""Asking before a destructive verb (rm, seal): on a terminal a question, else ``--force``."""

from __future__ import annotations

import sys

import click

__all__ = ["confirm"]


def confirm(force: bool, question: str) -> None:
    """Go on if ``force`` or the user says yes.

    Raises:
        click.UsageError: no terminal to ask and no ``--force`` (exit 2; nothing done).
        click.Abort: the user said no (exit 1).
    """
    if force:
        return
    if not sys.stdin.isatty():
        raise click.UsageError(f"{question} refused: not a terminal, add --force")
    click.confirm(question, abort=True)
