"""KV histories: how they are generated (hypothesis strategies) and run on a real server."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from datetime import timedelta
from typing import Any

from hypothesis import strategies as st

import jetstream
import kvstore

from .harness import (
    COMMIT_DEADLINE,
    Call,
    Recorder,
    World,
    stream_messages,
)
from .history import Fault, History, Step
from .kv_check import KvOutcome, Msg, msg_from_entry, msg_from_raw, value_of

HOT = [f"h.{i}" for i in range(5)]  # few keys: every write contends with others
WIDE = [f"w.{i}" for i in range(2000)]  # many keys: get_many beyond one batched read
WATCH_CATCH_UP = 30.0  # seconds a watch has to deliver everything once the history is over
NEVER = 10**9  # a revision no key has
EPILOGUE = "end"  # the key written once every fault is over

# -- generation ---------------------------------------------------------------------------------

_hot = st.sampled_from(HOT)
_cancel = st.one_of(st.none(), st.none(), st.none(), st.integers(0, 80))
_ttl = st.one_of(st.none(), st.none(), st.sampled_from(["1s", "2s"]))


def _step(kind: str, args: Any, cancel: Any = _cancel) -> st.SearchStrategy[Step]:
    return st.builds(Step, kind=st.just(kind), args=args, cancel_ms=cancel)


@st.composite
def _put_many_args(draw: st.DrawFn) -> dict[str, Any]:
    hot = draw(st.lists(_hot, min_size=1, max_size=3, unique=True))
    start = draw(st.integers(0, len(WIDE) - 1))
    wide = WIDE[start : start + draw(st.integers(0, 40))]
    expect = draw(st.sampled_from([None, "right", "stale", "create"]))
    return {"keys": hot + wide, "expect_mode": expect}


@st.composite
def _get_many_args(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(10, len(WIDE)))
    start = draw(st.integers(0, len(WIDE) - count))
    return {"start": start, "count": count}


KV_STEPS = st.one_of(
    _step("put", st.fixed_dictionaries({"key": _hot, "ttl": _ttl})),
    _step("create", st.fixed_dictionaries({"key": _hot})),
    _step("update", st.fixed_dictionaries({"key": _hot, "stale": st.booleans()})),
    _step("delete", st.fixed_dictionaries({"key": _hot})),
    _step("purge", st.fixed_dictionaries({"key": _hot})),
    _step("put_many", _put_many_args()),
    _step(
        "batch_abandon",
        st.fixed_dictionaries({"keys": st.lists(_hot, min_size=1, max_size=3, unique=True)}),
    ),
    _step("get", st.fixed_dictionaries({"key": _hot})),
    _step("get_many", _get_many_args()),
    _step("watch", st.fixed_dictionaries({"from_frac": st.floats(0, 1)}), st.none()),
    _step("sleep", st.fixed_dictionaries({"ms": st.integers(0, 200)}), st.none()),
)

FAULTS = st.builds(
    Fault,
    delay_ms=st.integers(0, 800),
    kind=st.sampled_from(["pause", "kill", "cut"]),
    seconds=st.floats(0.1, 1.5),
)


def kv_histories(*, max_steps: int, max_tasks: int, max_faults: int) -> st.SearchStrategy[History]:
    return st.builds(
        History,
        model=st.just("kv"),
        config=st.fixed_dictionaries({"history": st.sampled_from([1, 4])}),
        tasks=st.lists(
            st.lists(KV_STEPS, min_size=1, max_size=max_steps), min_size=1, max_size=max_tasks
        ),
        faults=st.lists(FAULTS, max_size=max_faults),
    )


# -- running ------------------------------------------------------------------------------------


class _Abandon(Exception):
    """Raised inside ``batch()`` to abandon it."""


class _Watch:
    """A watch running in the background from a revision until the history is over."""

    def __init__(self, call: Call, bucket: kvstore.Bucket, start: int) -> None:
        self.call = call
        self.start = start
        self.seen: list[Msg] = []
        self._bucket = bucket
        self._progress = asyncio.Event()
        call.start = time.monotonic()
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        async with self._bucket.watch(">", resume_from=self.start) as watcher:
            async for entry in watcher:
                self.seen.append(msg_from_entry(entry))
                self._progress.set()

    def _behind(self, target: int) -> bool:
        return not self.seen or self.seen[-1].seq < target

    async def finish(self, target: int) -> None:
        """Wait until the watch delivered ``target`` (or failed, or ran out of time), then
        stop it."""
        deadline = time.monotonic() + WATCH_CATCH_UP
        while not self._task.done() and target >= self.start and self._behind(target):
            self._progress.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.call.hung = True
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._progress.wait(), remaining)
        self.call.end = time.monotonic()
        if self._task.done():
            self.call.error = self._task.exception()
        else:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        self.call.result = len(self.seen)


class KvRun:
    def __init__(self, bucket: kvstore.Bucket, recorder: Recorder) -> None:
        self.bucket = bucket
        self.recorder = recorder
        self.known: dict[str, int] = {}  # the newest revision seen per key
        self.watches: list[_Watch] = []

    def _saw(self, key: str, revision: int) -> None:
        self.known[key] = max(self.known.get(key, 0), revision)

    def _revision(self, key: str, mode: str | None) -> int | None:
        known = self.known.get(key, 0)
        if mode == "create":
            return 0
        if mode == "right":
            return known
        if mode == "stale":
            return known - 1 if known > 1 else NEVER
        return None

    async def step(self, task: int, step: Step) -> None:
        if step.kind == "sleep":
            await asyncio.sleep(step.args["ms"] / 1000)
            return
        call = self.recorder.new_call(task, step.kind, step.args)
        if step.kind == "watch":
            newest = max(self.known.values(), default=1)
            call.args["from"] = max(1, int(step.args["from_frac"] * newest))
            self.watches.append(_Watch(call, self.bucket, call.args["from"]))
            return
        operation = getattr(self, f"_{step.kind}")(call)
        cancel = None if step.cancel_ms is None else step.cancel_ms / 1000
        await self.recorder.run(call, operation, cancel_after=cancel)
        self._learn(call)

    def _learn(self, call: Call) -> None:
        if not call.ok:
            return
        if isinstance(call.result, int) and "key" in call.args:
            self._saw(call.args["key"], call.result)
        elif isinstance(call.result, dict | kvstore.Snapshot):
            for key, value in call.result.items():
                self._saw(key, value if isinstance(value, int) else value.revision)
        elif isinstance(call.result, kvstore.Entry):
            self._saw(call.result.key, call.result.revision)

    # One factory per kind: each resolves its runtime arguments into call.args first.

    def _put(self, call: Call) -> Any:
        key = call.args["key"]
        return lambda: self.bucket.put(key, value_of(call.op_id, key), ttl=call.args["ttl"])

    def _create(self, call: Call) -> Any:
        key = call.args["key"]
        return lambda: self.bucket.create(key, value_of(call.op_id, key))

    def _update(self, call: Call) -> Any:
        key = call.args["key"]
        revision = self._revision(key, "stale" if call.args["stale"] else "right") or NEVER
        call.args["revision"] = revision
        return lambda: self.bucket.update(key, value_of(call.op_id, key), revision)

    def _delete(self, call: Call) -> Any:
        return lambda: self.bucket.delete(call.args["key"])

    def _purge(self, call: Call) -> Any:
        return lambda: self.bucket.purge(call.args["key"])

    def _put_many(self, call: Call) -> Any:
        keys = call.args["keys"]
        mode = call.args["expect_mode"]
        expected = self._revision(keys[0], mode)
        call.args["expect"] = {} if expected is None else {keys[0]: expected}
        items = [(key, value_of(call.op_id, key)) for key in keys]
        return lambda: self.bucket.put_many(
            items, expect=call.args["expect"], deadline=COMMIT_DEADLINE
        )

    def _batch_abandon(self, call: Call) -> Any:
        async def abandon() -> str:
            with contextlib.suppress(_Abandon):
                async with self.bucket.batch() as batch:
                    for key in call.args["keys"]:
                        batch.put(key, value_of(call.op_id, key))
                    raise _Abandon
            return "abandoned"

        return abandon

    def _get(self, call: Call) -> Any:
        return lambda: self.bucket.get(call.args["key"])

    def _get_many(self, call: Call) -> Any:
        start, count = call.args["start"], call.args["count"]
        call.args["keys"] = HOT + WIDE[start : start + count]
        return lambda: self.bucket.get_many(call.args["keys"])


async def run_kv(world: World, history: History) -> KvOutcome:
    """Run ``history`` on a fresh bucket and return everything the checker needs."""
    js = await world.connect()
    name = f"model_{uuid.uuid4().hex[:12]}"
    try:
        bucket = await kvstore.create_bucket(
            js, name, history=history.config["history"], marker_ttl=timedelta(seconds=1)
        )
        run = KvRun(bucket, Recorder())

        # A watch from the start sees every fault; the write after the faults is the first
        # thing it must deliver once its consumer was recreated (a resume one revision too
        # far skips exactly that one).
        await run.step(-1, Step("watch", {"from_frac": 0.0}))
        await world.play(js, history, run.step)
        await run.step(-1, Step("put", {"key": EPILOGUE, "ttl": None}))
        prefix = f"$KV.{name}."
        raw = await stream_messages(js, bucket.stream, f"{prefix}>")
        final = [msg_from_raw(message, prefix) for message in raw]
        target = max((m.seq for m in final), default=0)
        for watch in run.watches:
            await watch.finish(target)
        return KvOutcome(
            history=history.config["history"],
            calls=run.recorder.calls,
            final=final,
            watches={w.call.op_id: (w.start, w.seen) for w in run.watches},
        )
    finally:
        with contextlib.suppress(jetstream.JetStreamError):
            await kvstore.delete_bucket(js, name)
        await js.close()
