"""The ``jetstore`` command: its groups, and :func:`main`, which turns what ends a run into
the documented exit code (usage errors as one line, exit 2)."""

from __future__ import annotations

import sys

import click

from ._kv import kv
from ._obj import obj
from ._output import EXIT_INTERRUPTED, EXIT_USAGE
from ._server import server

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="jetstore", prog_name="jetstore")
def cli() -> None:
    """KV buckets and object stores on NATS JetStream.

    Every verb takes the connection options (--server or $NATS_URL, --creds, --nkey,
    --user/--password, --token, --tlscert/--tlskey/--tlsca, --timeout) and --json, --quiet,
    --debug. Exit codes: 0 ok, 1 not found / condition failed / operation failed, 2 usage,
    3 connection, authentication or timeout. See docs/CLI.md.
    """


cli.add_command(kv)
cli.add_command(obj)
cli.add_command(server)


def main(argv: list[str] | None = None) -> None:
    """Run the command line and exit with its code."""
    try:
        code = cli.main(args=argv, prog_name="jetstore", standalone_mode=False)
    except click.UsageError as exc:
        hint = f" (see: {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
        click.echo(f"jetstore: usage: {exc.format_message()}{hint}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        click.echo(f"jetstore: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("jetstore: aborted", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(code if isinstance(code, int) else 0)
