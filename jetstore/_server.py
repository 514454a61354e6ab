"""``jetstore server``: a nats-server with JetStream on loopback, for development."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType

import click

import jetstream

from ._connect import Settings, guarded, local_verb
from ._output import EXIT_FAILED, emit_json_line
from ._shown import shown

__all__ = ["server"]


@click.command("server")
@click.option(
    "--port",
    "-p",
    type=click.IntRange(0, 65535),
    default=4222,
    show_default=True,
    help="Client port on 127.0.0.1 (0 = a free one).",
)
@click.option(
    "--store",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the JetStream store here (default: a temporary directory, removed on exit).",
)
@local_verb
def server(settings: Settings, port: int, store: Path | None) -> None:
    """Run an embedded nats-server with JetStream, print its URL, stop cleanly on Ctrl-C (or
    SIGTERM). It listens on 127.0.0.1 only."""
    raise click.exceptions.Exit(guarded(settings, lambda: _serve(settings, port or None, store)))


def _serve(settings: Settings, port: int | None, store: Path | None) -> int:
    """Run the server until SIGINT or SIGTERM. Ctrl-C on a terminal reaches the nats-server
    child too (one process group), so its exit right after a signal is no failure."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    embedded = jetstream.EmbeddedServer(port=port, store_dir=store)
    embedded.start()
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        _announce(settings, embedded)
        while not stop.wait(0.2):
            if not embedded.running and not stop.wait(1.0):
                line = _last_log_line(embedded)
                click.echo(f"jetstore: error: nats-server exited: {shown(line)}", err=True)
                return EXIT_FAILED
    finally:
        embedded.close()  # a temporary store goes with it; a --store stays
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not settings.quiet and not settings.json:
        click.echo("stopped", err=True)
    return 0


def _last_log_line(embedded: jetstream.EmbeddedServer) -> str:
    try:
        lines = embedded.log_file.read_text(errors="replace").strip().splitlines()
    except OSError as exc:
        return f"no log ({exc.strerror})"
    return lines[-1] if lines else "no log line"


def _announce(settings: Settings, embedded: jetstream.EmbeddedServer) -> None:
    if settings.json:
        emit_json_line(
            {"url": embedded.url, "port": embedded.port, "store": str(embedded.store_dir)}
        )
        return
    click.echo(embedded.url)
    if not settings.quiet:
        click.echo(f"store: {embedded.store_dir}", err=True)
        click.echo(
            f"export NATS_URL={embedded.url}  # then: jetstore kv ls; Ctrl-C stops", err=True
        )
