"""Random KV histories (concurrent tasks, cancellations, server pauses, kill -9 and restarts,
connection cuts) on a real server, each checked against the model in ``kv_check``.

The default run explores a fixed set of examples (derandomized: the same histories every run,
so what the suite tries does not change between runs); ``-m model_long`` explores new ones,
``MODEL_EXAMPLES`` of them (default 500). A failure prints a replay command (``replay.py``)."""

from __future__ import annotations

import asyncio
import os

import pytest
from hypothesis import HealthCheck, given, settings

import jetstream

from .check import report, run_and_check
from .history import History
from .kv_run import kv_histories

FAST_SETTINGS = settings(
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    print_blob=False,
)
LONG_SETTINGS = settings(
    FAST_SETTINGS,
    derandomize=False,
    max_examples=int(os.environ.get("MODEL_EXAMPLES", "500")),
)


def check_history(server: jetstream.EmbeddedServer, history: History) -> None:
    """Run ``history`` and fail with a replayable report if it broke a promise."""
    violations, calls, faults = asyncio.run(run_and_check(server, history))
    if violations:
        raise AssertionError(report(history, violations, calls, faults))


@pytest.mark.timeout(240)
@settings(FAST_SETTINGS, max_examples=30)
@given(history=kv_histories(max_steps=8, max_tasks=3, max_faults=2))
def test_kv_histories_keep_every_promise(
    model_server: jetstream.EmbeddedServer, history: History
) -> None:
    check_history(model_server, history)


@pytest.mark.model_long
@pytest.mark.timeout(0)
@settings(LONG_SETTINGS)
@given(history=kv_histories(max_steps=12, max_tasks=4, max_faults=3))
def test_kv_histories_long(model_server: jetstream.EmbeddedServer, history: History) -> None:
    check_history(model_server, history)
