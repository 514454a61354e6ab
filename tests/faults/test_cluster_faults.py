"""Fault tests on a 3-node cluster, each asserting an invariant (see docs/RELIABILITY.md)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest

import jetstream
import kvstore
import objstore
from jetstream._consume.scan import scan_stream
from jetstream.testing import EmbeddedCluster
from tests.faults.conftest import (
    Outcome,
    assert_records_all_or_nothing,
    kill_leader,
    record,
    replicas_agree,
    restart,
)

pytestmark = pytest.mark.faults

RECORD_KEYS = 20
# Delays (ms) between starting a put_many and killing the leader: CI runs four spread over the
# window (a trial is a leader kill and restart, ~7 s); JETSTORE_FAULT_TRIALS=N sweeps N trials
# over every delay of SWEEP_DELAYS_MS (they repeat).
CI_DELAYS_MS = [0, 3, 10, 30]
SWEEP_DELAYS_MS = [0, 1, 2, 3, 5, 10, 20, 30]
_SWEEP = os.environ.get("JETSTORE_FAULT_TRIALS")
DELAYS_MS = (
    [SWEEP_DELAYS_MS[i % len(SWEEP_DELAYS_MS)] for i in range(int(_SWEEP))]
    if _SWEEP
    else CI_DELAYS_MS
)


async def test_leader_kill_racing_put_many_commits(cluster: EmbeddedCluster) -> None:
    """A1 + A3: each put_many returns revisions (all stored, on every replica) or a definite
    error (nothing stored); no CommitUnknownError within the deadline."""
    async with await cluster.connect(timeout=2.0) as js:
        bucket = await kvstore.create_bucket(js, "race", replicas=3)
        outcomes: dict[int, Outcome] = {}
        for trial, delay_ms in enumerate(DELAYS_MS):
            writing = asyncio.create_task(bucket.put_many(record(trial, RECORD_KEYS), deadline=45))
            await asyncio.sleep(delay_ms / 1000)
            leader = await kill_leader(cluster, js, bucket.stream)
            try:
                outcomes[trial] = await writing
            except jetstream.JetStreamError as exc:
                outcomes[trial] = exc
            await restart(cluster, leader)
        await assert_records_all_or_nothing(cluster, js, bucket, outcomes, RECORD_KEYS)


async def test_leader_kill_mid_upload(cluster: EmbeddedCluster) -> None:
    """F1/F2: an upload completes with a matching digest or raises UploadFailedError, and then
    no meta exists and cleanup leaves no orphan chunks."""
    async with await cluster.connect(timeout=2.0) as js:
        store = await objstore.create_store(js, "upl", replicas=3)
        data = os.urandom(24 * 1024 * 1024)

        async def kill_soon() -> int:
            await asyncio.sleep(0.15)
            return await kill_leader(cluster, js, store.stream)

        killing = asyncio.create_task(kill_soon())
        try:
            info: objstore.ObjectInfo | None = await store.put("big", data)
        except objstore.UploadFailedError:
            info = None
        await restart(cluster, await killing)
        await replicas_agree(cluster, store.stream)
        await _assert_complete_or_absent(js, store, "big", data, info)


@pytest.mark.parametrize("history", [30, 10])
async def test_watch_across_failover_and_full_restart(
    cluster: EmbeddedCluster, history: int
) -> None:
    """In order and each once, through a leader kill and a restart of all nodes: every revision
    the bucket still holds is delivered; the only ones skipped are those its history limit
    removed while the watch was away (the key's newer revisions are delivered instead). With
    history for all 18 revisions per key, that is every revision."""
    async with await cluster.connect(timeout=2.0) as js:
        bucket = await kvstore.create_bucket(js, f"watched{history}", replicas=3, history=history)
        written: list[int] = []
        delivered: list[int] = []

        async def watch() -> None:
            async with bucket.watch(include_history=True) as watcher:
                async for entry in watcher:
                    delivered.append(entry.revision)
                    if entry.key == "end":
                        return

        watching = asyncio.create_task(watch())
        for i in range(30):
            written.append(await bucket.put(f"k{i % 5}", str(i).encode()))
        leader = await kill_leader(cluster, js, bucket.stream)
        for i in range(30, 60):
            written.append(await bucket.put(f"k{i % 5}", str(i).encode()))
        await restart(cluster, leader)
        for node in cluster.nodes:
            await asyncio.to_thread(node.stop)
        await asyncio.to_thread(cluster.start)
        for i in range(60, 90):
            written.append(await bucket.put(f"k{i % 5}", str(i).encode()))
        written.append(await bucket.put("end", b""))
        try:
            await asyncio.wait_for(watching, 60)
        except TimeoutError:
            pytest.fail(f"watch stalled: {len(delivered)} of {len(written)} revisions")
        assert delivered == sorted(set(delivered)), "in order, each once"
        assert set(delivered) <= set(written) and delivered[-1] == written[-1]
        for revision in sorted(set(written) - set(delivered)):
            with pytest.raises(jetstream.MessageNotFoundError):
                await js.get_message(bucket.stream, revision, direct=False)  # beyond history
        assert len(delivered) >= 51, "at least the 51 revisions the bucket holds at the end"
        if history >= 18:
            assert delivered == written, "nothing trimmed: every revision exactly once"


async def test_operations_ride_out_an_election_within_the_deadline(
    cluster: EmbeddedCluster,
) -> None:
    async with await cluster.connect(timeout=2.0) as js:
        bucket = await kvstore.create_bucket(js, "elect", replicas=3)
        await bucket.put("k", b"before")
        loop = asyncio.get_running_loop()
        leader = await kill_leader(cluster, js, bucket.stream)
        started = loop.time()
        # A batch's 503 is an election while the stream exists: retried, not refused.
        await bucket.put_many({"k": b"during", "k2": b"many"})
        assert loop.time() - started < js.retry_deadline
        assert (await bucket.get("k2")).value == b"many"
        await bucket.put("k", b"during")
        assert (await bucket.get("k")).value == b"during"
        await restart(cluster, leader)
    async with await cluster.connect(timeout=1.0, retry_deadline=1.0) as impatient:
        bucket = await kvstore.open_bucket(impatient, "elect")
        await kill_leader(cluster, impatient, bucket.stream)
        started = loop.time()
        with contextlib.suppress(jetstream.NoRespondersError, jetstream.RequestTimeoutError):
            await bucket.put("k", b"hurry")  # gives up at its deadline
        assert loop.time() - started < 1.0 + 2 * 1.0 + 1, "never hangs past the deadline"
    for node in cluster.nodes:
        if not node.running:
            await asyncio.to_thread(node.start)


async def test_client_killed_mid_upload_leaves_only_removable_orphans(
    cluster: EmbeddedCluster,
) -> None:
    async with await cluster.connect(timeout=2.0) as js:
        store = await objstore.create_store(js, "killed", replicas=3)
    script = textwrap.dedent(
        f"""
        import asyncio, os, jetstream, objstore
        async def main():
            async with await jetstream.connect({cluster.urls!r}) as js:
                store = await objstore.open_store(js, "killed")
                async def slow():
                    for i in range(1000):
                        if i == 20:
                            print("sent", flush=True)
                        yield os.urandom(128 * 1024)
                        await asyncio.sleep(0.01)
                await store.put("partial", slow())
        asyncio.run(main())
        """
    )
    await _kill_when_it_says_sent(script)
    async with await cluster.connect(timeout=2.0) as js:
        store = await objstore.open_store(js, "killed")
        with pytest.raises(objstore.ObjectNotFoundError):
            await store.info("partial")
        assert await store.cleanup(older_than=timedelta(0)) == 1
        assert [m async for m in scan_stream(js, store.stream, ["$O.killed.C.>"])] == []


async def test_leader_stepdown_mid_upload(cluster: EmbeddedCluster) -> None:
    """A graceful leader change (stepdown API) during an upload: it completes and verifies, or
    fails with UploadFailedError leaving no meta and no orphans after cleanup."""
    async with await cluster.connect(timeout=2.0) as js:
        store = await objstore.create_store(js, "stepdown", replicas=3)
        data = os.urandom(24 * 1024 * 1024)

        async def step_down() -> None:
            await asyncio.sleep(0.1)
            await js.nc.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{store.stream}", b"", timeout=5)

        stepping = asyncio.create_task(step_down())
        try:
            info: objstore.ObjectInfo | None = await store.put("big", data)
        except objstore.UploadFailedError:
            info = None
        await stepping
        await _assert_complete_or_absent(js, store, "big", data, info)


async def test_client_killed_mid_atomic_batch_stores_nothing(
    cluster: EmbeddedCluster,
) -> None:
    async with await cluster.connect(timeout=2.0) as js:
        bucket = await kvstore.create_bucket(js, "halfbatch", replicas=3)
        await bucket.put("before", b"1")
    script = textwrap.dedent(
        f"""
        import asyncio, jetstream
        async def main():
            async with await jetstream.connect({cluster.urls!r}) as js:
                for seq in range(1, 50):  # an atomic batch that never commits
                    headers = {{"Nats-Batch-Id": "killed-batch", "Nats-Batch-Sequence": str(seq)}}
                    await js.nc.publish(f"$KV.halfbatch.k{{seq}}", b"x", headers=headers)
                await js.nc.flush()
                print("sent", flush=True)
                await asyncio.sleep(60)
        asyncio.run(main())
        """
    )
    await _kill_when_it_says_sent(script)
    async with await cluster.connect(timeout=2.0) as js:
        bucket = await kvstore.open_bucket(js, "halfbatch")
        assert [k async for k in bucket.keys()] == ["before"], "nothing of the batch is visible"
        assert (await bucket.status()).values == 1


async def _assert_complete_or_absent(
    js: jetstream.JetStream,
    store: objstore.ObjectStore,
    name: str,
    data: bytes,
    info: objstore.ObjectInfo | None,
) -> None:
    """An upload's outcome: returned ``info`` means the object reads back whole; None (it
    raised UploadFailedError) means no object; either way cleanup leaves no orphan chunks."""
    if info is not None:
        assert await store.get_bytes(name) == data
    else:
        with pytest.raises(objstore.ObjectNotFoundError):
            await store.info(name)
    await store.cleanup(older_than=timedelta(0))
    referenced = {i.nuid async for i in store.list()}
    chunks = {
        m.subject.rsplit(".", 1)[1]
        async for m in scan_stream(js, store.stream, [f"$O.{store.name}.C.>"])
    }
    assert chunks <= referenced, "no orphan chunks after cleanup"


async def _kill_when_it_says_sent(script: str) -> None:
    """Run ``script`` in a child process and SIGKILL it once it prints a line."""
    proc = subprocess.Popen(  # noqa: ASYNC220 (a child to kill -9, not awaited)
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    await asyncio.to_thread(proc.stdout.readline)
    proc.kill()
    proc.wait()
    proc.stdout.close()
