"""Which Python interpreter Spark's Python workers run: the driver's own, chosen before the
session exists, or a typed error on the driver when a local session already runs one that
cannot import the library.

PySpark fixes the workers' interpreter at two moments, from the environment, never from the
session's conf (``spark.pyspark.python`` only counts under spark-submit, which turns it into
``PYSPARK_PYTHON``):

- when the JVM starts: it finds the ``pyspark_*`` formats (``natskv``, ``natsobj``) with
  ``PYSPARK_DRIVER_PYTHON``, else ``PYSPARK_PYTHON``, else ``python3`` from PATH, once per JVM;
- when a SparkContext is created: ``SparkContext.pythonExec`` (``PYSPARK_PYTHON``, else
  ``python3``) runs every UDF and every format registered with ``spark.dataSource.register``.

So ``.venv/bin/python job.py``, the venv not on PATH, gave the workers a ``python3`` without
the library: ``No module named 'kvstore'`` (or DATA_SOURCE_NOT_FOUND) inside a Java trace.
Only ``*.spark`` modules import this one; it imports nothing of pyspark until called.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import MutableMapping
from typing import Any

from ._errors import SparkWorkerPythonError

__all__ = ["check_worker_python", "default_worker_python", "prefer_driver_python"]

_CHOSEN = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_GATEWAY_PORT")
"""Set by the user (the first two), or by a launcher that started the JVM before this
process and chose the interpreters itself (spark-submit, the pyspark shell): left alone."""

_NEEDED = ("pyarrow",)
"""What a worker needs besides the package itself (the formats' reads and writes)."""

_MISSING = (
    "import importlib.util as u, sys\nprint(*[m for m in sys.argv[1:] if not u.find_spec(m)])"
)
"""Prints which of its arguments an interpreter cannot import (found, not imported: fast)."""


def default_worker_python(environ: MutableMapping[str, str], *, session_started: bool) -> None:
    """Make Spark's workers run this interpreter (``PYSPARK_PYTHON``), unless the user or a
    launcher chose one, or a session already started (too late for it: see
    :func:`check_worker_python`)."""
    if session_started or not sys.executable or any(name in environ for name in _CHOSEN):
        return
    environ["PYSPARK_PYTHON"] = sys.executable


def prefer_driver_python() -> None:
    """:func:`default_worker_python` for this process: called when ``kvstore.spark`` or
    ``objstore.spark`` is imported, which is before the session in a script that imports
    first."""
    from pyspark import SparkContext

    started = getattr(SparkContext, "_active_spark_context", None) is not None
    default_worker_python(os.environ, session_started=started)


def check_worker_python(spark: Any, package: str) -> None:
    """Refuse a local session whose Python workers cannot import ``package`` (or pyarrow):
    every job of the format would fail inside them. Sessions on a cluster (the workers run
    elsewhere) and Spark Connect sessions (no SparkContext here) are not checked.

    Raises:
        SparkWorkerPythonError: the workers' interpreter is not found or lacks a module; the
            message names the fix (``PYSPARK_PYTHON`` set before the session is created).
    """
    context = getattr(spark, "sparkContext", None)  # Spark Connect: AttributeError, None
    python = getattr(context, "pythonExec", None)
    if context is None or python is None or not str(context.master).startswith("local"):
        return
    problem = _worker_problem(python, package)
    if problem:
        raise SparkWorkerPythonError(
            f"Spark's Python workers run {python!r}, which {problem}: set "
            f"PYSPARK_PYTHON={sys.executable} before creating the SparkSession "
            f"(or import {package}.spark before it)"
        )


@functools.lru_cache(maxsize=16)
def _worker_problem(python: str, package: str) -> str | None:
    """What keeps ``python`` (a path, or a name looked up on PATH as Spark does) from running
    ``package``'s formats, or None. This interpreter itself is fine without asking it."""
    found = shutil.which(python)
    if found is None:
        return "is not found"
    if os.path.abspath(found) == os.path.abspath(sys.executable):
        return None
    modules = (package, *_NEEDED)
    try:
        done = subprocess.run(
            [found, "-c", _MISSING, *modules], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"does not run ({type(exc).__name__})"
    if done.returncode != 0:
        return f"does not run (exit status {done.returncode})"
    missing = done.stdout.split()
    return f"cannot import {', '.join(missing)}" if missing else None
