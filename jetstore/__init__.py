"""jetstore: the ``jetstore`` command line over kvstore, objstore and jetstream.

``jetstore kv ...`` (KV buckets), ``jetstore obj ...`` (object stores, with progress bars),
``jetstore cg ...`` (partitioned consumer groups) and
``jetstore server`` (an embedded nats-server for development); also ``python -m jetstore``.
It needs the ``cli`` extra (click and rich): ``pip install 'jetstore[cli]'``. Nothing in the
library imports this package; it only uses the public APIs of the layers below it.
"""

from __future__ import annotations

import sys

__all__ = ["main"]

_MISSING_EXTRA = "the jetstore command needs the 'cli' extra ({}): pip install 'jetstore[cli]'"


def main() -> None:
    """Run the command (the ``jetstore`` console script). Without the ``cli`` extra the
    console script is still installed: it then says what to install, in one line, exit 2.

    Raises:
        SystemExit: always, with the documented exit code (130 for Ctrl-C, wherever it lands:
            while modules are still being imported, too).
    """
    try:
        _run()
    except KeyboardInterrupt:
        print("jetstore: interrupted", file=sys.stderr)
        raise SystemExit(130) from None


def _run() -> None:
    try:
        import click  # noqa: F401
        import rich  # noqa: F401
    except ImportError as exc:
        print(
            f"jetstore: error: {_MISSING_EXTRA.format(f'{exc.name} is not installed')}",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    from ._app import main as run

    run()
