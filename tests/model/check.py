"""Run one history and check it: the entry point shared by the tests and the replay tool."""

from __future__ import annotations

import jetstream

from .harness import Call, World
from .history import History
from .kv_check import check_kv
from .kv_run import run_kv
from .obj_check import check_obj
from .obj_run import run_obj


async def run_and_check(
    server: jetstream.EmbeddedServer, history: History
) -> tuple[list[str], list[Call], list[str]]:
    """Run ``history`` and return (violations, calls, faults injected)."""
    async with World(server) as world:
        if history.model == "kv":
            outcome = await run_kv(world, history)
            return check_kv(outcome), outcome.calls, world.faults
        if history.model == "obj":
            obj_outcome = await run_obj(world, history)
            return check_obj(obj_outcome), obj_outcome.calls, world.faults
        raise ValueError(f"unknown model {history.model!r}")


def report(history: History, violations: list[str], calls: list[Call], faults: list[str]) -> str:
    """What a failing history prints: the broken promises, a replay script, the calls."""
    lines = ["broken promises:", *(f"  - {v}" for v in violations[:30]), "", history.script()]
    lines += ["", "calls as recorded:", *(f"  {call.describe()}" for call in calls)]
    lines += [f"  fault: {fault}" for fault in faults]
    return "\n".join(lines)
