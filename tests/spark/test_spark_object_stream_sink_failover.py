"""The long trials of ``writeStream.format("natsobj")`` (``-m spark_long``): the driver (a
process of its own, with its JVM) SIGKILLed mid micro-batch, a Python worker killed while
Spark retries its task and the server restarted, each after partition 0 of micro-batch 1
stored some of its objects, and the stream leader of an R3 store killed after partition 0 of
micro-batch 2 did; every row's object must end up stored whole, its meta record written
once."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

import jetstream

pyspark = pytest.importorskip("pyspark", reason="needs the 'spark' extra")

from pyspark.errors import StreamingQueryException  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from jetstream._options import run_sync  # noqa: E402
from jetstream.testing import EmbeddedCluster  # noqa: E402
from tests.spark import object_sink_trials as trials  # noqa: E402
from tests.spark.object_sink_trials import OBJECTS, HookedSource  # noqa: E402
from tests.spark.stream_sink_trials import converged, driver, forget_commit  # noqa: E402
from tests.spark.stream_sink_trials import wait_for as wait_while  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.spark_long]


@pytest.mark.timeout(900)
def test_the_driver_killed_mid_micro_batch(
    spark: SparkSession,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("os")
    trials.store(nats_server.url, name)
    inputs, contents = trials.inputs(tmp_path / "in")
    checkpoint = tmp_path / "checkpoint"
    options = trials.options(nats_server.url, name, **trials.hook(tmp_path, 2, "pause"))
    with trials.meta_writes(nats_server.url, name) as writes:
        with driver(inputs, checkpoint, options, format="natsobj_hooked") as alive:
            wait_while(tmp_path / "reached", "paused mid micro-batch", alive)
        assert len(writes) == OBJECTS + 2, "micro-batch 0, and 2 objects of micro-batch 1"
        trials.run(spark, inputs, checkpoint, **trials.options(nats_server.url, name))
    assert sorted(writes) == sorted(contents), "each object's meta record written once"
    assert trials.contents(nats_server.url, name, list(contents)) == contents


@pytest.mark.timeout(900)
def test_a_python_worker_killed_mid_write_and_its_task_retried_by_spark(
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    name = unique_name("os")
    trials.store(nats_server.url, name)
    inputs, contents = trials.inputs(tmp_path / "in")
    options = trials.options(nats_server.url, name, **trials.hook(tmp_path, 3, "kill"))
    done = tmp_path / "done"
    more = {"master": "local[2,3]", "done": str(done), "format": "natsobj_hooked"}
    with (
        trials.meta_writes(nats_server.url, name) as writes,
        driver(inputs, tmp_path / "checkpoint", options, **more) as alive,
    ):
        wait_while(done, "ended the query (the task retried)", alive)
    assert (tmp_path / "reached").exists(), "the worker was killed"
    assert sorted(writes) == sorted(contents), "each object's meta record written once"
    assert trials.contents(nats_server.url, name, list(contents)) == contents


@pytest.mark.timeout(900)
def test_the_server_restarted_mid_micro_batch(
    spark: SparkSession, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    spark.dataSource.register(HookedSource)
    name = unique_name("os")
    inputs, contents = trials.inputs(tmp_path / "in")
    with jetstream.EmbeddedServer() as server:
        trials.store(server.url, name)
        options = trials.options(server.url, name, **trials.hook(tmp_path, 2, "pause"))
        checkpoint = str(tmp_path / "checkpoint")
        query = trials.start_query(spark, inputs, checkpoint, "natsobj_hooked", **options)
        try:
            trials.wait_for(tmp_path / "reached", "paused mid micro-batch")
            server.restart()
            stored = trials.names(server.url, name)  # micro-batch 0, and 2 of micro-batch 1
            with trials.meta_writes(server.url, name) as writes:
                (tmp_path / "go").touch()
                query.awaitTermination()
        finally:
            (tmp_path / "go").touch()
        assert len(stored) == OBJECTS + 2
        assert sorted(stored + writes) == sorted(contents), "each meta record written once"
        assert trials.contents(server.url, name, list(contents)) == contents


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "patience",
    [{}, {"retryDeadline": "0.5", "requestTimeout": "0.5"}],
    ids=["waiting_out_the_election", "giving_up_midway"],
)
def test_the_stream_leader_killed_mid_micro_batch(
    spark: SparkSession, unique_name: Callable[[str], str], tmp_path: Path, patience: dict[str, str]
) -> None:
    """An R3 store whose stream leader is killed (kill -9) while partition 0 of micro-batch 2,
    the last, waits after 2 objects; the task then uploads its other objects (of up to 10
    chunks) through the election: with the default ``retryDeadline`` it waits the election
    out, with 0.5 s it fails wherever the election catches it (reopening the store, or an
    upload or meta record of unknown outcome) and so does the query. The
    query is restarted from its checkpoint with the killed node still down, and replays
    micro-batch 2 (if the first run committed it, its commit-log entry is removed first): the
    replay finds what is stored on the new leader."""
    spark.dataSource.register(HookedSource)
    name = unique_name("os")
    inputs, contents = trials.inputs(tmp_path / "in")
    checkpoint = tmp_path / "checkpoint"
    with EmbeddedCluster(3) as cluster:
        urls = ",".join(cluster.urls)
        trials.store(urls, name, replicas=3)

        async def leader() -> int:
            async with await cluster.connect() as js:
                return await cluster.leader_of(js, f"OBJ_{name}")

        killed = None
        with trials.meta_writes(urls, name) as writes:
            hook = trials.hook(tmp_path, 2, "pause", micro_batch=2)
            options = trials.options(urls, name, **hook, **patience)
            query = trials.start_query(spark, inputs, str(checkpoint), "natsobj_hooked", **options)
            try:
                trials.wait_for(tmp_path / "reached", "paused mid micro-batch")
                stored = trials.names(urls, name)  # micro-batches 0 and 1, 2 of micro-batch 2
                killed = run_sync(leader)
                cluster.nodes[killed].kill()
            finally:
                (tmp_path / "go").touch()
            with contextlib.suppress(StreamingQueryException):  # a task failed in the election
                query.awaitTermination()
            if (checkpoint / "commits" / "2").exists():
                forget_commit(checkpoint, 2)
            replay = trials.run(spark, inputs, checkpoint, **trials.options(urls, name))
            assert replay.lastProgress["batchId"] == 2
        cluster.nodes[killed].start()
        converged(cluster, f"OBJ_{name}")
        assert len(stored) == 2 * OBJECTS + 2
        assert sorted(writes) == sorted(contents), "each object's meta record written once"
        assert trials.contents(urls, name, list(contents)) == contents
