"""Group members in separate processes (``pcg_journal_member.py``) and the one checker of
what their journals prove, for the multi-process tests of consumer groups.

Every process journals the start, in-progress calls, end and ack of each message on one
system-wide clock (the line format is in ``pcg_journal_member.py``); :meth:`Journals.check`
asserts the invariants users rely on: every expected message processed, never two members
(or instances) working on one key at once, each key's messages in order, and a message
processed again only if its ack did not reach the server in time (the processing that
acked it took longer than ``ack_wait`` since its start or its last ``in_progress()``, or
the process was killed).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import os
import pathlib
import sys
import time
from collections import defaultdict
from collections.abc import Callable

SCRIPT = pathlib.Path(__file__).with_name("pcg_journal_member.py")
ROOT = SCRIPT.parent.parent.parent
DEADLINE = 60.0
LATE: float = 0.95
"""A processing acked later than this share of ``ack_wait`` after its start (or its last
``in_progress()``) was late: the server may have given the message out again meanwhile."""


@dataclasses.dataclass(frozen=True)
class Line:
    tag: str  # S(tart), P(rogress), C(ancelled), E(nd), A(cked), T (stop returned)
    key: str
    n: int
    delivered: int
    t: int  # monotonic ns, one clock for all processes
    instance: str


class Member:
    """One member instance in a child process, journalling to ``<dir>/<instance>``."""

    def __init__(self, proc: asyncio.subprocess.Process, instance: str, path: pathlib.Path):
        self.proc = proc
        self.instance = instance
        self.path = path
        self.ended_at: int | None = None  # when it was killed (monotonic ns)

    @classmethod
    async def start(
        cls,
        url: str,
        kind: str,
        stream: str,
        member: str,
        instance: str,
        journal_dir: pathlib.Path,
        *,
        ack_wait: float,
        max_ack_pending: int = 1,
        delay: float | str = 0.001,
        flush: bool = False,
        confirm: bool = False,
        timeout: float = 5.0,
        group: str = "g",
        iterate: bool = False,
    ) -> Member:
        """Start ``member`` (KIND static, elastic or watch: then ``stream`` is the bucket),
        with a handler or (``iterate``) iterated; ``delay``: the work per message without a
        plan, ``HIGH`` (0 to HIGH) or ``"LOW:HIGH"`` seconds."""
        path = journal_dir / instance
        options = [
            f"--ack-wait={ack_wait}",
            f"--max-ack-pending={max_ack_pending}",
            f"--delay={delay}",
            f"--timeout={timeout}",
        ]
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(SCRIPT),
            url,
            kind,
            stream,
            group,
            member,
            str(path),
            *options,
            *(["--flush"] if flush else []),
            *(["--confirm"] if confirm else []),
            *(["--iterate"] if iterate else []),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        return cls(proc, instance, path)

    async def ready(self) -> None:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), DEADLINE)
        assert line == b"ready\n", f"{self.instance} did not start: {line!r}"

    def lines(self) -> list[Line]:
        if not self.path.exists():
            return []
        out = []
        # Read while the member appends: the last line may be half written yet.
        *whole, _partial = self.path.read_text().split("\n")
        for raw in whole:
            tag, key, n, delivered, t = raw.split()
            out.append(Line(tag, key, int(n), int(delivered), int(t), self.instance))
        return out

    def ask_to_stop(self) -> None:
        """Make the process call ``stop()`` on its member (it journals ``T`` once it returned,
        then exits)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"stop\n")

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.ended_at = time.monotonic_ns()
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()  # SIGKILL: no goodbye, the pin stays until it times out
        await self.proc.wait()


class Journals:
    """The members' journals, read together."""

    def __init__(self, members: list[Member]) -> None:
        self.members = members

    def lines(self) -> list[Line]:
        return sorted((line for m in self.members for line in m.lines()), key=lambda x: x.t)

    def summary(self) -> dict[str, tuple[int, int]]:
        """Per instance: (messages started, acks journalled), for failure messages."""
        out = {}
        for m in self.members:
            tags = [x.tag for x in m.lines()]
            out[m.instance] = (tags.count("S"), tags.count("A"))
        return out

    def processed(self) -> set[tuple[str, int]]:
        """Messages whose work ended (an E line; a process killed right after it may not
        have journalled the ack although the server got it)."""
        return {(x.key, x.n) for x in self.lines() if x.tag == "E"}

    def idle(self) -> bool:
        """Whether every processing started has ended (or was cancelled)."""
        open_: set[tuple[str, str, int, int]] = set()
        for x in self.lines():
            run = (x.instance, x.key, x.n, x.delivered)
            if x.tag == "S":
                open_.add(run)
            elif x.tag in ("E", "C"):
                open_.discard(run)
        return not open_

    def started(self) -> dict[tuple[str, int], list[Line]]:
        """Each message's S lines, in time order."""
        out: dict[tuple[str, int], list[Line]] = defaultdict(list)
        for x in self.lines():
            if x.tag == "S":
                out[(x.key, x.n)].append(x)
        return out

    def again(self) -> set[tuple[str, int]]:
        """Messages started more than once."""
        return {message for message, starts in self.started().items() if len(starts) > 1}

    def check(
        self, expected: set[tuple[str, int]], *, ack_wait: float, strict_order: bool
    ) -> dict[str, int]:
        """Assert the invariants; return counts (redeliveries ...).

        ``strict_order``: each key's processing never goes back (a message is started again
        only before any newer one of its key); otherwise only its first processing of each
        message is in order."""
        lines = self.lines()
        assert {(x.key, x.n) for x in lines if x.tag == "E"} == expected, "not all processed"
        self.check_exclusive(lines)
        starts: dict[str, list[int]] = defaultdict(list)
        for x in lines:
            if x.tag == "S":
                starts[x.key].append(x.n)
        for key, numbers in starts.items():
            seen = list(dict.fromkeys(numbers))
            assert seen == sorted(seen), f"{key}: first processing out of order: {numbers}"
            if strict_order:
                assert numbers == sorted(numbers), f"{key}: processing went back: {numbers}"
        late = self._late(lines, ack_wait)
        acked_at: dict[tuple[str, int], int] = {}
        redelivered = 0
        for x in lines:
            if x.tag == "A":
                acked_at.setdefault((x.key, x.n), x.t)
            elif x.tag == "S":
                if (x.key, x.n) in acked_at:
                    assert (x.key, x.n) in late, f"{x.key}:{x.n} came again after its ack"
                redelivered += x.delivered > 1
        return {"redelivered": redelivered, "starts": sum(len(s) for s in starts.values())}

    def check_exclusive(self, lines: list[Line] | None = None) -> None:
        """Assert that no two instances worked on one key at once: in ``lines`` (the whole
        run), or so far (a message still in work counts until now)."""
        now = time.monotonic_ns()
        ended = {m.instance: m.ended_at or (now if lines is None else None) for m in self.members}
        runs = self._runs(self.lines() if lines is None else lines, ended)
        for key, items in runs.items():
            for (_, end, who), (start, _, other) in itertools.pairwise(items):
                assert start >= end, f"{key}: {who} and {other} worked on it at once"

    @staticmethod
    def _late(lines: list[Line], ack_wait: float) -> set[tuple[str, int]]:
        """Messages a processing acked late: more than ``LATE * ack_wait`` after its start
        or its last in-progress call."""
        alive: dict[tuple[str, str, int, int], int] = {}
        late = set()
        for x in lines:
            run = (x.instance, x.key, x.n, x.delivered)
            if x.tag in ("S", "P"):
                alive[run] = x.t
            elif x.tag == "A" and x.t - alive.pop(run, x.t) > LATE * ack_wait * 1e9:
                late.add((x.key, x.n))
        return late

    @staticmethod
    def _runs(
        lines: list[Line], ended: dict[str, int | None]
    ) -> dict[str, list[tuple[int, int, str]]]:
        """Per key, the (start, end, instance) of every processing in start order; one that
        was cancelled ends then, one that never ended (its process was killed) lasts until
        the kill."""
        open_: dict[tuple[str, str, int], int] = {}
        runs: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
        for x in lines:
            if x.tag == "S":
                open_[(x.instance, x.key, x.n)] = x.t
            elif x.tag in ("E", "C"):
                start = open_.pop((x.instance, x.key, x.n))
                runs[x.key].append((start, x.t, x.instance))
        for (instance, key, _), start in open_.items():
            end = ended[instance]
            assert end is not None, f"{instance} left {key} unfinished while alive"
            runs[key].append((start, end, instance))
        for items in runs.values():
            items.sort()
        return runs


async def wait_for(
    condition: Callable[[], bool],
    what: str,
    timeout: float = DEADLINE,
    state: Callable[[], object] = lambda: "",
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what} {state()}"
        await asyncio.sleep(0.05)
