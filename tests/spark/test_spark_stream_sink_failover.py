"""The long trials of ``writeStream.format("natskv")`` (``-m spark_long``): a replicated bucket
whose stream leader is killed mid micro-batch, the driver (a process of its own, with its JVM)
SIGKILLed mid micro-batch and between micro-batches, and a Python worker killed while Spark
retries its task; every input row must end up as exactly one revision of its key, in input
order per key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import jetstream
import kvstore

pyspark = pytest.importorskip("pyspark", reason="needs the 'spark' extra")

from pyspark.sql import SparkSession  # noqa: E402

from jetstream._options import run_sync  # noqa: E402
from jetstream.testing import EmbeddedCluster  # noqa: E402
from tests.spark import stream_sink_trials as trials  # noqa: E402
from tests.spark.stream_sink_trials import Expected, HookedSource, start_query  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.spark_long]


def _cluster_revisions(cluster: EmbeddedCluster, name: str, keys: list[str]) -> Expected:
    async def read() -> Expected:
        async with await cluster.connect() as js:
            bucket = await kvstore.open_bucket(js, name)
            return {k: [(e.op.value, e.value) for e in await bucket.history(k)] for k in keys}

    return run_sync(read)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("batches", [1, 3, 6])
def test_the_stream_leader_killed_mid_micro_batch(
    spark: SparkSession, unique_name: Callable[[str], str], tmp_path: Path, batches: int
) -> None:
    spark.dataSource.register(HookedSource)
    name = unique_name("ss")
    inputs, expected = trials.inputs(tmp_path / "in")
    with EmbeddedCluster(3) as cluster:

        async def create() -> int:
            async with await cluster.connect() as js:
                await kvstore.create_bucket(js, name, history=64, replicas=3)
                return await cluster.leader_of(js, f"KV_{name}")

        run_sync(create)
        hook = trials.hook(tmp_path, batches, "pause")
        options = trials.options(",".join(cluster.urls), name, **hook)
        query = start_query(spark, inputs, str(tmp_path / "checkpoint"), "natskv_hooked", **options)
        killed = None
        try:
            trials.wait_for(tmp_path / "reached", "paused mid micro-batch")

            async def leader() -> int:
                async with await cluster.connect() as js:
                    return await cluster.leader_of(js, f"KV_{name}")

            killed = run_sync(leader)
            cluster.nodes[killed].kill()
        finally:
            (tmp_path / "go").touch()
        query.awaitTermination()
        cluster.nodes[killed].start()
        trials.converged(cluster, f"KV_{name}")
        found = _cluster_revisions(cluster, name, list(expected))
        assert trials.differences(found, expected) == []


@pytest.mark.timeout(300)
def test_the_driver_killed_mid_micro_batch(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("ss")
    trials.bucket(nats_server.url, name)
    inputs, expected = trials.inputs(tmp_path / "in")
    checkpoint = tmp_path / "checkpoint"
    hook = trials.hook(tmp_path, 2, "pause")
    options = trials.options(nats_server.url, name, **hook)
    with trials.driver(inputs, checkpoint, options) as alive:
        trials.wait_for(tmp_path / "reached", "paused mid micro-batch", alive)
    stored = trials.revisions(nats_server.url, name, list(expected))
    assert 0 < sum(map(len, stored.values())) < sum(map(len, expected.values()))
    trials.run(spark, inputs, checkpoint, **trials.options(nats_server.url, name))
    assert trials.revisions(nats_server.url, name, list(expected)) == expected


@pytest.mark.timeout(300)
@pytest.mark.parametrize("atomicity", ["task", "microBatch"])
def test_the_driver_killed_between_micro_batches(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
    atomicity: str,
) -> None:
    name = unique_name("ss")
    trials.bucket(nats_server.url, name)
    inputs, expected = trials.inputs(tmp_path / "in")
    checkpoint = tmp_path / "checkpoint"
    mode = {"atomicity": atomicity, "batchSize": "8" if atomicity == "task" else "1000"}
    # The hook never fires (no micro-batch 9): the driver is killed once micro-batch 1 committed.
    options = trials.options(nats_server.url, name, **trials.hook(tmp_path, 1, "pause", 9), **mode)
    with trials.driver(inputs, checkpoint, options) as alive:
        trials.wait_for(checkpoint / "commits" / "1", "committed micro-batch 1", alive)
    trials.run(spark, inputs, checkpoint, **trials.options(nats_server.url, name, **mode))
    found = trials.revisions(nats_server.url, name, list(expected))
    assert trials.differences(found, expected) == []


@pytest.mark.timeout(300)
@pytest.mark.parametrize("batches", [1, 4])
def test_a_python_worker_killed_mid_write_and_its_task_retried_by_spark(
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
    batches: int,
) -> None:
    name = unique_name("ss")
    trials.bucket(nats_server.url, name)
    inputs, expected = trials.inputs(tmp_path / "in")
    options = trials.options(nats_server.url, name, **trials.hook(tmp_path, batches, "kill"))
    done = tmp_path / "done"
    with trials.driver(
        inputs, tmp_path / "checkpoint", options, master="local[2,3]", done=str(done)
    ) as alive:
        trials.wait_for(done, "ended the query (the task retried)", alive)
    assert (tmp_path / "reached").exists(), "the worker was killed"
    found = trials.revisions(nats_server.url, name, list(expected))
    assert trials.differences(found, expected) == []
