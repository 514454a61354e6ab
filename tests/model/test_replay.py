"""A failing history's report is a runnable reproduction: its JSON round-trips, and the replay
command runs it on its own server and says whether it kept its promises."""

from __future__ import annotations

import pytest

from .history import Fault, History, Step
from .replay import main

HISTORY = History(
    model="kv",
    config={"history": 4},
    tasks=[
        [Step("put", {"key": "h.0", "ttl": None}), Step("get", {"key": "h.0"})],
        [Step("put_many", {"keys": ["h.1", "w.3"], "expect_mode": "create"}, cancel_ms=50)],
    ],
    faults=[Fault(delay_ms=10, kind="cut", seconds=0.1)],
)


def test_a_history_round_trips_through_its_json() -> None:
    assert History.from_json(HISTORY.to_json()) == HISTORY
    assert HISTORY.to_json() in HISTORY.script()


def test_the_replay_command_runs_a_history_and_reports(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([HISTORY.to_json(), "--times", "2"]) == 0
    out = capsys.readouterr().out
    assert "run 1: ok" in out and "run 2: ok" in out
