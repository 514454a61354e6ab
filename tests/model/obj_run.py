"""Object-store histories: generation (hypothesis strategies) and running on a real server."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from hypothesis import strategies as st

import jetstream
import objstore

from .harness import (
    STALL_TIMEOUT,
    Call,
    Recorder,
    World,
    api_request,
    stream_messages,
)
from .history import History, Step
from .kv_run import FAULTS
from .obj_check import ObjOutcome, StoredObject

NAMES = ["o0", "o1", "o2"]  # few names: every write contends with others
LINKS = ["l0", "l1"]
_PRELUDE = {"chunk": 1024, "source": "bytes", "fail_at": None}
META_RACE_MAX = 200  # metadata updates racing one upload, at most
QUIESCE = 15.0  # seconds for background commits and cleanups to finish after a history


class SourceFailed(Exception):
    """Raised by an upload's source midway, as a user's generator might."""


def content(op_id: int, size: int) -> bytes:
    """The bytes upload ``op_id`` writes: unique per upload, so a digest names its upload."""
    seed = hashlib.sha256(str(op_id).encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


# -- generation ---------------------------------------------------------------------------------

_name = st.sampled_from(NAMES)
_cancel = st.one_of(st.none(), st.none(), st.none(), st.integers(0, 120))

_PUT = st.builds(
    Step,
    kind=st.just("put"),
    args=st.fixed_dictionaries(
        {
            "name": _name,
            "size": st.one_of(st.integers(0, 2000), st.integers(2000, 400_000)),
            "chunk": st.sampled_from([1024, 8192, 65536]),
            "source": st.sampled_from(["bytes", "agen"]),
            "fail_at": st.one_of(st.none(), st.none(), st.floats(0, 1)),
            "meta_race": st.booleans(),
        }
    ),
    cancel_ms=_cancel,
)

# A burst of metadata updates on one name keeps a read-then-rewrite window open for a while,
# so a racing upload's commit lands inside one (a rewrite not conditional on the record it
# read would then bring back the replaced record: caught as a lost upload, a record that does
# not read back, or orphan chunks).
_UPDATE_META = st.builds(
    Step,
    kind=st.just("update_meta"),
    args=st.fixed_dictionaries({"name": _name, "times": st.sampled_from([1, 1, 5, 20])}),
)

OBJ_STEPS = st.one_of(
    _PUT,
    _PUT,
    _UPDATE_META,
    _UPDATE_META,
    st.builds(
        Step,
        kind=st.just("rename"),
        args=st.fixed_dictionaries({"name": _name, "new": _name}),
        cancel_ms=_cancel,
    ),
    st.builds(Step, kind=st.just("delete"), args=st.fixed_dictionaries({"name": _name})),
    st.builds(
        Step,
        kind=st.just("link"),
        args=st.fixed_dictionaries({"name": st.sampled_from(LINKS), "target": _name}),
    ),
    st.builds(
        Step,
        kind=st.just("read"),
        args=st.fixed_dictionaries(
            {"name": st.sampled_from(NAMES + LINKS), "delay_ms": st.sampled_from([0, 0, 5, 40])}
        ),
        cancel_ms=_cancel,
    ),
    st.builds(Step, kind=st.just("sleep"), args=st.fixed_dictionaries({"ms": st.integers(0, 200)})),
)


def obj_histories(*, max_steps: int, max_tasks: int, max_faults: int) -> st.SearchStrategy[History]:
    return st.builds(
        History,
        model=st.just("obj"),
        config=st.just({}),
        tasks=st.lists(
            st.lists(OBJ_STEPS, min_size=1, max_size=max_steps), min_size=1, max_size=max_tasks
        ),
        faults=st.lists(FAULTS, max_size=max_faults),
    )


# -- running ------------------------------------------------------------------------------------


class ObjRun:
    def __init__(self, store: objstore.ObjectStore, recorder: Recorder) -> None:
        self.store = store
        self.recorder = recorder
        self.contents: dict[str, int] = {}  # sha256 hex of every upload's bytes -> op id

    async def step(self, task: int, step: Step) -> None:
        if step.kind == "sleep":
            await asyncio.sleep(step.args["ms"] / 1000)
            return
        call = self.recorder.new_call(task, step.kind, step.args)
        operation = getattr(self, f"_{step.kind}")(call)
        cancel = None if step.cancel_ms is None else step.cancel_ms / 1000
        if not step.args.get("meta_race"):
            await self.recorder.run(call, operation, cancel_after=cancel)
            return
        # Metadata updates on the same name for as long as the upload runs: its commit lands
        # between an update's read and its rewrite (which must then not bring back the
        # record the upload replaced).
        finished = asyncio.Event()

        async def upload() -> None:
            await self.recorder.run(call, operation, cancel_after=cancel)
            finished.set()

        meta = self.recorder.new_call(task, "update_meta", {"name": step.args["name"]})
        await asyncio.gather(upload(), self.recorder.run(meta, self._meta_until(meta, finished)))

    def _meta_until(self, call: Call, finished: asyncio.Event) -> Any:
        async def update() -> int:
            count = 0
            while not finished.is_set() and count < META_RACE_MAX:
                await self.store.update_meta(call.args["name"], description=f"d{call.op_id}")
                count += 1
            return count

        return update

    def _put(self, call: Call) -> Any:
        data = content(call.op_id, call.args["size"])
        self.contents[hashlib.sha256(data).hexdigest()] = call.op_id
        fail_at = call.args["fail_at"]
        chunk = call.args["chunk"]

        async def generate() -> AsyncIterator[bytes]:
            for offset in range(0, len(data), chunk):
                if fail_at is not None and offset >= fail_at * len(data):
                    raise SourceFailed(f"source of #{call.op_id} failed at {offset}")
                yield data[offset : offset + chunk]
                await asyncio.sleep(0)
            if fail_at is not None:
                raise SourceFailed(f"source of #{call.op_id} failed at the end")

        if call.args["source"] == "bytes" and fail_at is None:
            return lambda: self.store.put(call.args["name"], data, chunk_size=chunk)
        call.args["source"] = "agen"
        return lambda: self.store.put(call.args["name"], generate(), chunk_size=chunk)

    def _update_meta(self, call: Call) -> Any:
        async def update() -> objstore.ObjectInfo:
            for _ in range(call.args.get("times", 1) - 1):
                await self.store.update_meta(call.args["name"], description=f"d{call.op_id}")
            return await self.store.update_meta(call.args["name"], description=f"d{call.op_id}")

        return update

    def _rename(self, call: Call) -> Any:
        return lambda: self.store.update_meta(call.args["name"], new_name=call.args["new"])

    def _delete(self, call: Call) -> Any:
        return lambda: self.store.delete(call.args["name"])

    def _link(self, call: Call) -> Any:
        return lambda: self.store.add_link(call.args["name"], call.args["target"])

    def _read(self, call: Call) -> Any:
        async def read() -> str:
            digest = hashlib.sha256()
            async with self.store.open(call.args["name"], stall_timeout=STALL_TIMEOUT) as reader:
                async for chunk in reader:
                    digest.update(chunk)
                    if call.args["delay_ms"]:
                        await asyncio.sleep(call.args["delay_ms"] / 1000)
            return digest.hexdigest()

        return read


async def final_state(js: jetstream.JetStream, store: str) -> tuple[list[StoredObject], set[str]]:
    """The store's live meta records and the nuids its chunks are stored under, read with raw
    API requests (not the library under test)."""
    stream = f"OBJ_{store}"
    records: dict[str, dict[str, Any]] = {}
    for message in await stream_messages(js, stream, f"$O.{store}.M.>"):
        records[message.subject] = json.loads(message.data)  # the newest per subject wins
    info = await api_request(js, f"STREAM.INFO.{stream}", {"subjects_filter": f"$O.{store}.C.>"})
    assert info is not None
    subjects = info["state"].get("subjects") or {}
    chunk_nuids = {subject.rsplit(".", 1)[1] for subject in subjects}
    live = [
        StoredObject(
            name=record["name"],
            nuid=record.get("nuid", ""),
            size=record.get("size", 0),
            chunks=record.get("chunks", 0),
            link=bool((record.get("options") or {}).get("link")),
        )
        for record in records.values()
        if not record.get("deleted")
    ]
    return live, chunk_nuids


async def _read_back(store: objstore.ObjectStore, name: str) -> str | BaseException:
    try:
        return hashlib.sha256(await store.get_bytes(name, stall_timeout=STALL_TIMEOUT)).hexdigest()
    except jetstream.JetStreamError as exc:
        return exc


async def run_obj(world: World, history: History) -> ObjOutcome:
    """Run ``history`` on a fresh store and return everything the checker needs."""
    js = await world.connect()
    name = f"model_{uuid.uuid4().hex[:12]}"
    try:
        store = await objstore.create_store(js, name)
        run = ObjRun(store, Recorder())

        for number, first in enumerate(NAMES):  # every name starts as an object
            size = 3000 * (number + 1)
            await run.step(-1, Step("put", {**_PRELUDE, "name": first, "size": size}))
        await world.play(js, history, run.step)
        live, chunk_nuids = await _settled_state(js, name)
        final_reads = {obj.name: await _read_back(store, obj.name) for obj in live}
        return ObjOutcome(run.recorder.calls, run.contents, live, chunk_nuids, final_reads)
    finally:
        with contextlib.suppress(jetstream.JetStreamError):
            await objstore.delete_store(js, name)
        await js.close()


async def _settled_state(
    js: jetstream.JetStream, store: str
) -> tuple[list[StoredObject], set[str]]:
    """The final state once background work (a cancelled upload's purge, a commit finishing
    after its caller was cancelled) is done: chunks and records stop changing, or QUIESCE
    seconds pass (then the last state is judged as it is)."""
    deadline = asyncio.get_running_loop().time() + QUIESCE
    state = await final_state(js, store)
    while asyncio.get_running_loop().time() < deadline:
        referenced = {obj.nuid for obj in state[0]}
        if state[1] <= referenced:
            return state
        await asyncio.sleep(0.25)
        state = await final_state(js, store)
    return state
