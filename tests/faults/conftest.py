"""A 3-node JetStream cluster on loopback per test module (own ports and store dirs, nodes
stopped by pid), with helpers to kill the stream leader and bring a node back."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator

import pytest

import jetstream
import kvstore
from jetstream._consume.scan import scan_stream
from jetstream.testing import EmbeddedCluster


@pytest.fixture(scope="module")
def whole_cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(3) as nodes:
        yield nodes


@pytest.fixture
def cluster(whole_cluster: EmbeddedCluster) -> EmbeddedCluster:
    """The module's cluster, with every node running and current before each test."""
    return whole_cluster.start()


async def kill_leader(cluster: EmbeddedCluster, js: jetstream.JetStream, stream: str) -> int:
    """kill -9 the node leading ``stream``; return its index. Waits (up to 30 s) for a leader:
    right after the previous trial's kill and restart the stream may still be electing one."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        try:
            leader = await cluster.leader_of(js, stream)
            break
        except jetstream.JetStreamError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.05)
    await asyncio.to_thread(cluster.nodes[leader].kill)
    return leader


async def restart(cluster: EmbeddedCluster, index: int) -> None:
    await asyncio.to_thread(cluster.nodes[index].start)


async def replicas_agree(
    cluster: EmbeddedCluster, stream: str, timeout: float = 30
) -> dict[str, object]:
    """Wait until every node holds the same state of ``stream``; return it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        states = [cluster.stream_state(i, stream) for i in range(len(cluster.nodes))]
        keys = {(s or {}).get("last_seq"): s for s in states}
        if (
            None not in states
            and len(keys) == 1
            and len({(s or {}).get("messages") for s in states}) == 1
        ):
            return states[0] or {}
        assert loop.time() < deadline, f"replicas disagree: {states}"
        await asyncio.sleep(0.2)


Outcome = dict[str, int] | BaseException
"""What one put_many returned: its revisions, or the error it raised."""


async def assert_records_all_or_nothing(
    cluster: EmbeddedCluster,
    js: jetstream.JetStream,
    bucket: kvstore.Bucket,
    outcomes: dict[int, Outcome],
    keys_per_record: int,
) -> None:
    """The put_many invariants once the replicas agree: record ``n`` (keys ``r<n>.k<i>``) is
    stored whole or not at all; returned revisions are exactly where its keys are stored; a
    definite error means nothing stored; no CommitUnknownError (the deadline was not hit)."""
    state = await replicas_agree(cluster, bucket.stream)
    stored: Counter[int] = Counter()
    async for message in scan_stream(js, bucket.stream, [f"$KV.{bucket.name}.>"]):
        stored[int(message.subject.split(".")[2][1:])] += 1
    assert sum(stored.values()) == state["messages"], "the bucket holds only the records"
    for record, outcome in outcomes.items():
        assert not isinstance(outcome, jetstream.CommitUnknownError), outcome
        if isinstance(outcome, dict):
            assert stored[record] == keys_per_record, f"record {record} returned revisions"
            for key, revision in outcome.items():
                message = await js.get_message(bucket.stream, revision, direct=False)
                assert message.subject == f"$KV.{bucket.name}.{key}"
        else:
            assert stored[record] == 0, f"record {record} failed ({outcome!r}) but was stored"
    assert all(stored[r] in (0, keys_per_record) for r in stored), "never half a record"


def record(n: int, keys: int) -> dict[str, bytes]:
    """Record ``n``: ``keys`` keys ``r<n>.k<i>`` carrying ``n``."""
    return {f"r{n}.k{i}": str(n).encode() for i in range(keys)}


async def writes_during(
    buckets: list[kvstore.Bucket],
    fault: Callable[[], Awaitable[None]],
    keys: int = 10,
) -> dict[int, Outcome]:
    """One writer per bucket (each its own client, say) calls put_many in a loop, from 0.3 s
    before ``fault()`` until 0.3 s after it; writer ``w`` writes records ``w``, ``w + W``, ...
    Returns every record's outcome."""
    outcomes: dict[int, Outcome] = {}
    faulting = asyncio.Event()

    async def write(first: int, bucket: kvstore.Bucket) -> None:
        n = first
        while not faulting.is_set():
            try:
                outcomes[n] = await bucket.put_many(record(n, keys), deadline=45)
            except jetstream.JetStreamError as exc:
                outcomes[n] = exc
            n += len(buckets)

    writers = [asyncio.create_task(write(w, b)) for w, b in enumerate(buckets)]
    try:
        await asyncio.sleep(0.3)
        await fault()
        await asyncio.sleep(0.3)
    finally:
        faulting.set()
        await asyncio.gather(*writers)
    return outcomes


async def until(condition: Callable[[], bool], what: str, within: float = 60) -> None:
    """Wait for ``condition()``; fail the test naming ``what`` if it is not true ``within``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():
        assert loop.time() < deadline, f"not within {within}s: {what}"
        await asyncio.sleep(0.05)


def fault_for(
    seconds: float, begin: Callable[[], object], end: Callable[[], object]
) -> Callable[[], Awaitable[None]]:
    """A fault for :func:`writes_during`: ``begin()``, wait ``seconds``, then ``end()``
    (always), e.g. ``fault_for(3, node.pause, node.resume)``."""

    async def fault() -> None:
        begin()
        try:
            await asyncio.sleep(seconds)
        finally:
            end()

    return fault
