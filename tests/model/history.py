"""Histories: what a model test runs, as plain JSON-able data so that a failing one can be
printed and replayed (``python -m tests.model.replay``).

A history is a few tasks, each a list of steps run one after another (the tasks run
concurrently), plus a list of faults injected on their own schedule. A step may carry a
``cancel_ms``: the operation is cancelled that many milliseconds after it starts."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Step:
    kind: str
    args: dict[str, Any] = field(default_factory=dict)
    cancel_ms: int | None = None


@dataclass(frozen=True)
class Fault:
    delay_ms: int  # after the previous fault (or the start)
    kind: str  # pause | kill | cut
    seconds: float  # how long the server stays paused or down


@dataclass(frozen=True)
class History:
    model: str  # "kv" or "obj"
    config: dict[str, Any]
    tasks: list[list[Step]]
    faults: list[Fault]

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> History:
        data = json.loads(text)
        return cls(
            model=data["model"],
            config=data["config"],
            tasks=[[Step(**step) for step in task] for task in data["tasks"]],
            faults=[Fault(**fault) for fault in data["faults"]],
        )

    def script(self) -> str:
        """A runnable reproduction: the command and the steps, one per line."""
        lines = [
            "# reproduce with (from the project root):",
            f"#   .venv/bin/python -m tests.model.replay '{self.to_json()}'",
            f"# model {self.model}, config {self.config}",
        ]
        for number, task in enumerate(self.tasks):
            lines.append(f"# task {number}:")
            lines.extend(
                f"#   {step.kind}({step.args})"
                + (f" cancelled after {step.cancel_ms} ms" if step.cancel_ms is not None else "")
                for step in task
            )
        lines.extend(
            f"# fault after {f.delay_ms} ms: {f.kind} for {f.seconds:.2f} s" for f in self.faults
        )
        return "\n".join(lines)
