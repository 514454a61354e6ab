"""How a verb ends: exit codes, the one-line error on stderr, JSON and plain output.

Exit codes (documented in docs/CLI.md, relied on by scripts):

- 0: done;
- 1: not found, a condition failed (compare-and-set, create over a live key), or the server
  refused or failed the operation (an upload, a digest mismatch, a full stream);
- 2: usage: a bad option, key, TTL, name or input file; nothing was sent;
- 3: the server cannot be reached, refused the credentials or the permission, or timed out;
- 130: interrupted (Ctrl-C) where that is not the normal end of the verb;
- 141: stdout was closed by its reader (``| head``), where that is not the normal end of the
  verb: it stops quietly, as a command ended by SIGPIPE does (nothing half-written);
- 143: terminated (SIGTERM: ``kill``, systemd, ``docker stop``), cleaned up as on Ctrl-C.
"""

from __future__ import annotations

import logging
import sys
import traceback
from typing import Any, Final

import click

import jetstream
import kvstore

from ._shown import json_text, shown

__all__ = [
    "EXIT_CONNECTION",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_OUTPUT_CLOSED",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "emit_json",
    "emit_json_line",
    "error_line",
    "exit_code_for",
    "note",
    "report_error",
    "setup_logging",
    "show_fields",
]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_CONNECTION: Final = 3
EXIT_INTERRUPTED: Final = 130
EXIT_OUTPUT_CLOSED: Final = 141
EXIT_TERMINATED: Final = 143

# Classes checked in order: the first match decides (subclasses before their bases).
_CONNECTION_ERRORS: Final = (
    jetstream.ConnectionFailedError,  # AuthenticationError is one
    jetstream.ConnectionClosedError,
    jetstream.DisconnectedError,
    jetstream.RequestTimeoutError,
    jetstream.NoRespondersError,
    jetstream.PermissionDeniedError,
)


def exit_code_for(error: BaseException) -> int:
    """The documented exit code of an error that ended a verb."""
    if isinstance(error, click.UsageError | click.BadParameter):
        return EXIT_USAGE
    if isinstance(error, jetstream.ClientValidationError):
        return EXIT_USAGE
    if isinstance(error, _CONNECTION_ERRORS):
        return EXIT_CONNECTION
    if isinstance(error, kvstore.LockTimeoutError):  # a lock held by another, not a network
        return EXIT_FAILED
    if isinstance(error, TimeoutError):
        return EXIT_CONNECTION
    if isinstance(error, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return EXIT_FAILED


def error_line(error: BaseException) -> str:
    """One line for stderr: the error's class (for library errors) and its message (which
    may quote server text: shown escaped)."""
    if isinstance(error, KeyboardInterrupt):
        return "jetstore: interrupted"
    text = shown(" ".join(str(error).split())) or type(error).__name__
    if isinstance(error, jetstream.JetStreamError):
        return f"jetstore: error: {type(error).__name__}: {text}"
    if isinstance(error, OSError) and error.filename is not None:
        return f"jetstore: error: {error.strerror or text}: {shown(str(error.filename))}"
    if isinstance(error, OSError | ValueError):
        return f"jetstore: error: {text}"
    return f"jetstore: error: {type(error).__name__}: {text} (a bug? --debug shows where)"


def report_error(error: BaseException, *, debug: bool, code: int | None = None) -> int:
    """Print the error (its traceback first with ``--debug``) and return its exit code
    (``code`` when the verb knows better than the error's class)."""
    if debug:  # its messages may quote server text too
        sys.stderr.write(shown("".join(traceback.format_exception(error)), lines=True))
    click.echo(error_line(error), err=True)
    return exit_code_for(error) if code is None else code


def emit_json(document: Any) -> None:
    """One JSON document on stdout (indented: read by people and by ``jq`` alike)."""
    click.echo(json_text(document, indent=2))


def emit_json_line(document: Any) -> None:
    """One compact JSON document per line (streams: watch, uploads), flushed at once."""
    click.echo(json_text(document))


def show_fields(fields: dict[str, Any], *, json: bool, quiet: bool) -> None:
    """An info document: indented JSON, or ``name: value`` lines (``-`` for none; server
    text escaped)."""
    if json:
        emit_json(fields)
    elif not quiet:
        for name, value in fields.items():
            click.echo(f"{name}: {_plain(value)}")


def _plain(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict):
        return ", ".join(f"{shown(str(k))}={shown(str(v))}" for k, v in value.items()) or "-"
    return str(value).lower() if isinstance(value, bool) else shown(str(value))


def note(line: str, *, json: bool, quiet: bool) -> None:
    """A human line about what was done (``deleted ...``): not with ``--json`` or ``--quiet``."""
    if not json and not quiet:
        click.echo(line)


class _QuietTlsEof(logging.Filter):
    """Drop asyncio's "returning true from eof_received() has no effect when using ssl",
    logged when a TLS connection ends: nats-py upgrades a plain stream to TLS, so the stream
    protocol does not know it runs over TLS. Harmless, and printed by every TLS verb."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name == "asyncio" and "eof_received()" in record.getMessage())


class _LogLine(logging.Formatter):
    """A log record as jetstore shows it: escaped (it may quote server text: a skipped
    stream's name) and on one line, an exception it carries (nats-py logs some of its own with
    ``exc_info``) named after the message; with ``--debug`` its traceback follows, its lines
    kept."""

    def __init__(self, fmt: str, *, debug: bool) -> None:
        super().__init__(fmt)
        self._debug = debug

    def formatMessage(self, record: logging.LogRecord) -> str:
        return shown(super().formatMessage(record))

    def formatException(self, ei: Any) -> str:
        return shown(super().formatException(ei), lines=True)

    def formatStack(self, stack_info: str) -> str:
        return shown(super().formatStack(stack_info), lines=True)

    def format(self, record: logging.LogRecord) -> str:
        # "warning", as the rest of the line reads; on a copy, not by renaming the levels
        # process-wide (logging.addLevelName would change every other logger's lines too).
        record = logging.makeLogRecord({**record.__dict__, "levelname": record.levelname.lower()})
        if self._debug:
            return super().format(record)
        error = record.exc_info[1] if record.exc_info else None
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        try:
            line = super().format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved
        if error is not None:
            line += shown(f" ({type(error).__name__}: {' '.join(str(error).split())})")
        return line


def setup_logging(*, debug: bool) -> None:
    """Library warnings (a reconnect, a skipped record) as ``jetstore: warning: ...`` lines on
    stderr, one line each; everything, down to debug, and tracebacks with ``--debug``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LogLine("jetstore: %(levelname)s: %(message)s", debug=debug))
    handler.addFilter(_QuietTlsEof())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
