"""jetstore: the ``jetstore`` command line over kvstore, objstore and jetstream.

``jetstore kv ...`` (KV buckets), ``jetstore obj ...`` (object stores, with progress bars),
``jetstore cg ...`` (partitioned consumer groups) and
``jetstore server`` (an embedded nats-server for development); also ``python -m jetstore``.
It needs the ``cli`` extra (click and rich): ``pip install 'jetstore[cli]'``. Nothing in the
library imports this package; it only uses the public APIs of the layers below it.
"""

from __future__ import annotations

try:
    import click as _click  # noqa: F401
    import rich as _rich  # noqa: F401
except ImportError as exc:  # the library without the extra: say what to install
    raise ImportError(
        f"the jetstore command needs the 'cli' extra ({exc.name} is not installed): "
        "pip install 'jetstore[cli]'"
    ) from None

from ._app import cli, main

__all__ = ["cli", "main"]
