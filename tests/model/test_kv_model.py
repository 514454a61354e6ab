"""Random KV histories (concurrent tasks, cancellations, server pauses, kill -9 and restarts,
connection cuts) on a real server, each checked against the model in ``kv_check``.

The default run explores a fixed set of examples (derandomized: the same histories every run,
so the suite stays deterministic in what it tries); ``-m model_long`` explores new ones for as
long as ``MODEL_EXAMPLES`` says. A failure prints a replay command (see ``replay.py``)."""

from __future__ import annotations

import asyncio
import os

import pytest
from hypothesis import HealthCheck, given, settings

import jetstream

from .check import report, run_and_check
from .history import History
from .kv_run import kv_histories

FAST_EXAMPLES = 10
LONG_EXAMPLES = int(os.environ.get("MODEL_EXAMPLES", "500"))

_SETTINGS = {
    "deadline": None,
    "database": None,
    "suppress_health_check": list(HealthCheck),
    "print_blob": False,
}


def _check(server: jetstream.EmbeddedServer, history: History) -> None:
    violations, calls, faults = asyncio.run(run_and_check(server, history))
    if violations:
        raise AssertionError(report(history, violations, calls, faults))


@pytest.mark.timeout(240)
@settings(max_examples=FAST_EXAMPLES, derandomize=True, **_SETTINGS)
@given(history=kv_histories(max_steps=5, max_tasks=3, max_faults=1))
def test_kv_histories_keep_every_promise(
    model_server: jetstream.EmbeddedServer, history: History
) -> None:
    _check(model_server, history)


@pytest.mark.model_long
@pytest.mark.timeout(0)
@settings(max_examples=LONG_EXAMPLES, **_SETTINGS)
@given(history=kv_histories(max_steps=12, max_tasks=4, max_faults=3))
def test_kv_histories_long(model_server: jetstream.EmbeddedServer, history: History) -> None:
    _check(model_server, history)
