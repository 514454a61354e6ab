"""Random object-store histories (concurrent uploads from bytes and failing generators,
metadata updates, renames, deletes, links, slow readers, cancellations, server pauses, kill -9
and restarts, connection cuts) on a real server, each checked against ``obj_check``.

Modes as in ``test_kv_model``: derandomized examples by default, ``-m model_long`` for new
ones (``MODEL_EXAMPLES`` of them)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

import jetstream

from .history import History
from .obj_run import obj_histories
from .test_kv_model import FAST_SETTINGS, LONG_SETTINGS, check_history


@pytest.mark.timeout(240)
@settings(FAST_SETTINGS, max_examples=12)
@given(history=obj_histories(max_steps=6, max_tasks=3, max_faults=2))
def test_object_histories_keep_every_promise(
    model_server: jetstream.EmbeddedServer, history: History
) -> None:
    check_history(model_server, history)


@pytest.mark.model_long
@pytest.mark.timeout(0)
@settings(LONG_SETTINGS)
@given(history=obj_histories(max_steps=12, max_tasks=4, max_faults=3))
def test_object_histories_long(model_server: jetstream.EmbeddedServer, history: History) -> None:
    check_history(model_server, history)
