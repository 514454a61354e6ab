"""The ``jetstore`` command: its groups, and :func:`main`, which turns what ends a run into
the documented exit code (usage errors as one line, exit 2)."""

from __future__ import annotations

import importlib
import sys

import click

from ._endings import ClosedStdout, whole_writes
from ._habits import VerbGroup, explained
from ._output import EXIT_INTERRUPTED, EXIT_USAGE

__all__ = ["cli", "main"]

# Each group is imported when used: `jetstore kv ...` never loads objstore or the server
# code (every invocation is a new process, and scripts run many).
_GROUPS = {
    "cg": "jetstore._cg",
    "kv": "jetstore._kv",
    "obj": "jetstore._obj",
    "server": "jetstore._server",
}

# click >= 8.2 raises this for a group called without a verb (older versions print the help).
_NO_ARGS: tuple[type[Exception], ...] = tuple(
    getattr(click.exceptions, name)
    for name in ("NoArgsIsHelpError",)
    if hasattr(click.exceptions, name)
)


class _LazyGroup(VerbGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_GROUPS)

    def own_command(self, ctx: click.Context, name: str) -> click.Command | None:
        module = _GROUPS.get(name)
        if module is None:
            return None
        command = getattr(importlib.import_module(module), name)
        assert isinstance(command, click.Command)
        return command


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    aliases={"object": "obj"},
    show_shared=True,
)
@click.version_option(package_name="jetstore", prog_name="jetstore")
def cli() -> None:
    """KV buckets, object stores and consumer groups on NATS JetStream.

    The options below may come anywhere on the line, as natscli's do: `jetstore -s URL kv
    ls`, `jetstore kv -s URL ls` and `jetstore kv ls -s URL` are the same. Exit codes: 0 ok,
    1 not found / condition failed / operation failed, 2 usage, 3 connection, authentication
    or timeout, 130 Ctrl-C, 141 stdout closed by its reader, 143 SIGTERM. See docs/CLI.md.
    """


def main(argv: list[str] | None = None) -> None:
    """Run the command line (``argv``, default ``sys.argv[1:]``) and exit with its code.

    Raises:
        SystemExit: always, with the documented exit code (docs/CLI.md).
    """
    if sys.stdout is None:  # started with stdout closed (``>&-``): Python leaves None
        sys.stdout = ClosedStdout()
    else:
        sys.stdout = whole_writes(sys.stdout)
    try:
        code = cli.main(args=argv, prog_name="jetstore", standalone_mode=False)
    except click.UsageError as exc:
        if isinstance(exc, _NO_ARGS):  # `jetstore kv`: the group's help, as a usage error
            click.echo(exc.format_message(), err=True)
            sys.exit(EXIT_USAGE)
        message = explained(exc) if isinstance(exc, click.NoSuchOption) else exc.format_message()
        hint = f" (see: {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
        click.echo(f"jetstore: usage: {message}{hint}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        click.echo(f"jetstore: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except click.Abort as exc:
        # click turns a Ctrl-C outside the event loop (at a question, say) into Abort, the
        # same as a question answered no: told apart by the exception it replaced.
        if isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):
            click.echo("jetstore: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        click.echo("jetstore: aborted", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("jetstore: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(code if isinstance(code, int) else 0)
