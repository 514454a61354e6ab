"""Hostile review session 10, Spark data sources: breaks found (each test fails on the code
it was written against)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jetstream
import kvstore
import objstore

pyspark = pytest.importorskip("pyspark", reason="needs the 'spark' extra")

import kvstore.spark  # noqa: E402
import objstore.spark  # noqa: E402

from ..proxy import TcpProxy  # noqa: E402

pytestmark = pytest.mark.spark

_BOUND = 90.0  # seconds a task may take to notice a server that stopped answering
# (a batched direct get gives up after ~25 s; a write after ~40 s)


def _run(factory: Callable[[], Any]) -> Any:
    return jetstream.run_sync(factory)


@contextlib.contextmanager
def _paused_when(server: jetstream.EmbeddedServer, pattern: bytes) -> Iterator[str]:
    """A proxy URL to ``server`` that SIGSTOPs the server the moment a client sends
    ``pattern`` (so planning, which never sends it, runs against a live server, and the task
    finds it paused mid-read, its connection already open). SIGCONT on the way out."""
    pid = server.pid
    assert pid is not None
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    proxy = asyncio.run_coroutine_threadsafe(TcpProxy(server.port).start(), loop).result()

    def hook(chunk: bytes) -> bool:
        if pattern in chunk:
            os.kill(pid, signal.SIGSTOP)
        return True

    proxy.on_client_bytes = hook
    try:
        yield proxy.url
    finally:
        os.kill(pid, signal.SIGCONT)
        asyncio.run_coroutine_threadsafe(proxy.close(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def _outcome_within(
    spark: Any,
    server: jetstream.EmbeddedServer,
    action: Callable[[], Any],
    bound: float,
    on_overrun: Callable[[], Any] = lambda: None,
) -> tuple[float, BaseException | None]:
    """Run a Spark action in a thread; (seconds it took, its error). A job still running after
    ``bound`` seconds is let go (the server resumed) and reported as taking longer."""
    errors: list[BaseException] = []

    def target() -> None:
        kvstore.spark.register(spark)
        objstore.spark.register(spark)
        try:
            action()
        except BaseException as exc:
            errors.append(exc)

    started = time.monotonic()
    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(timeout=bound)
    elapsed = time.monotonic() - started
    if worker.is_alive():
        assert server.pid is not None
        os.kill(server.pid, signal.SIGCONT)
        on_overrun()
        worker.join(timeout=120)
    return elapsed, errors[0] if errors else None


def _typed(error: BaseException | None) -> bool:
    text = str(error)
    return any(f"{tree}._errors." in text for tree in ("jetstream", "kvstore", "objstore"))


async def _fill_bucket(url: str, name: str, history: int = 1) -> None:
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.create_bucket(js, name, history=history)
        await bucket.put_many({f"k{i}": b"v" for i in range(50)})


# -- 1. a server that stops answering while tasks run --------------------------------------------


@pytest.mark.timeout(420)
def test_a_natskv_read_task_fails_typed_and_in_bounded_time_when_the_server_pauses(
    spark: Any,
) -> None:
    """A history-1 bucket's read task scans with an ordered consumer; the server paused
    (SIGSTOP) once the task asks for it. The task retries the consumer create forever
    (``ordered consumer reset (initial create failed) failed: ... no reply within 20.3s``,
    then connection timeouts, over and over): the job never ends. A batched direct get (a
    history-5 bucket) fails with RequestTimeoutError after ~25 s instead."""
    with jetstream.EmbeddedServer() as server:
        _run(lambda: _fill_bucket(server.url, "paused1"))
        with _paused_when(server, b"$JS.API.CONSUMER.CREATE") as url:

            def read() -> None:
                spark.read.format("natskv").option("servers", url).option(
                    "numPartitions", "1"
                ).load("paused1").collect()

            elapsed, error = _outcome_within(spark, server, read, _BOUND)
    assert elapsed < _BOUND, f"the read job was still running after {elapsed:.0f} s"
    assert error is not None and _typed(error), str(error)[-2000:]


@pytest.mark.timeout(420)
def test_a_natskv_stream_task_fails_typed_and_in_bounded_time_when_the_server_pauses(
    spark: Any, tmp_path: Any
) -> None:
    """The same for a micro-batch's task (``_read_range``): an availableNow query never ends."""
    with jetstream.EmbeddedServer() as server:
        _run(lambda: _fill_bucket(server.url, "paused2"))
        with _paused_when(server, b"$JS.API.CONSUMER.CREATE") as url:
            queries: list[Any] = []

            def stream() -> None:
                query = (
                    spark.readStream.format("natskv")
                    .option("servers", url)
                    .option("bucket", "paused2")
                    .load()
                    .writeStream.format("memory")
                    .queryName("paused_stream_s10")
                    .option("checkpointLocation", str(tmp_path / "cp"))
                    .trigger(availableNow=True)
                    .start()
                )
                queries.append(query)
                query.awaitTermination()

            def stop() -> None:
                for query in queries:
                    query.stop()

            elapsed, error = _outcome_within(spark, server, stream, _BOUND, stop)
    assert elapsed < _BOUND, f"the streaming query was still running after {elapsed:.0f} s"
    assert error is not None and _typed(error), str(error)[-2000:]


@pytest.mark.timeout(420)
def test_a_natsobj_read_task_fails_typed_and_in_bounded_time_when_the_server_pauses(
    spark: Any,
) -> None:
    """natsobj's task lists the store with an ordered consumer: the same endless retries."""
    with jetstream.EmbeddedServer() as server:

        async def fill() -> None:
            async with await jetstream.connect(server.url) as js:
                store = await objstore.create_store(js, "paused3")
                await store.put("a", b"x")

        _run(fill)
        with _paused_when(server, b"$JS.API.CONSUMER.CREATE") as url:

            def read() -> None:
                spark.read.format("natsobj").option("servers", url).load("paused3").collect()

            elapsed, error = _outcome_within(spark, server, read, _BOUND)
    assert elapsed < _BOUND, f"the natsobj read was still running after {elapsed:.0f} s"
    assert error is not None and _typed(error), str(error)[-2000:]


# -- 2. streaming: a checkpoint resumed on a bucket deleted and created again ----------------------


@pytest.mark.timeout(300)
def test_a_stream_resumed_after_the_bucket_was_recreated_does_not_skip_its_first_changes(
    spark: Any,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    tmp_path: Any,
) -> None:
    """The checkpoint holds ``{"seq": 10}`` from the old bucket; the new bucket's revisions
    start at 1 again, and the resumed query reads only revisions 11 and 12: ``new0``..``new9``
    are silently lost (no error, no row). A user relies on a resumed stream either delivering
    every change of the bucket it reads or failing (the checkpoint's bucket is gone)."""
    name = unique_name("rc")

    async def fill(count: int, prefix: str) -> None:
        async with await jetstream.connect(nats_server.url) as js:
            bucket = await kvstore.create_bucket(js, name)
            for i in range(count):
                await bucket.put(f"{prefix}{i}", b"v")

    async def delete() -> None:
        async with await jetstream.connect(nats_server.url) as js:
            await kvstore.delete_bucket(js, name)

    def run() -> list[str]:
        keys: list[str] = []
        query = (
            spark.readStream.format("natskv")
            .option("servers", nats_server.url)
            .option("bucket", name)
            .load()
            .writeStream.foreachBatch(lambda df, _: keys.extend(r.key for r in df.collect()))
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination(120)
        finally:
            query.stop()
        return keys

    kvstore.spark.register(spark)
    _run(lambda: fill(10, "old"))
    assert run() == [f"old{i}" for i in range(10)]
    _run(delete)
    _run(lambda: fill(12, "new"))
    try:
        # As Spark's Kafka source fails on data loss: the checkpoint's bucket is gone.
        with pytest.raises(Exception, match="deleted and created again") as failed:
            run()
        assert "BucketNotFoundError" in str(failed.value), str(failed.value)[-2000:]
    finally:
        with contextlib.suppress(kvstore.BucketNotFoundError):
            _run(delete)


# -- 3. options: a bucket or store given twice, one silently ignored ---------------------------


def test_a_natskv_read_with_a_bucket_option_and_a_different_load_path_is_refused(
    spark: Any, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """``.option("bucket", A).load(B)`` reads A and drops B without a word (``bucket`` is
    taken first, the path only when it is absent), although unread options are refused
    elsewhere "so that nothing is silently ignored". Reading the wrong bucket silently is
    worse than a typo: the job succeeds with another bucket's rows."""
    first, second = unique_name("ba"), unique_name("bb")

    async def fill() -> None:
        async with await jetstream.connect(nats_server.url) as js:
            for name in (first, second):
                bucket = await kvstore.create_bucket(js, name)
                await bucket.put("from", name.encode())

    _run(fill)
    kvstore.spark.register(spark)
    try:
        rows = (
            spark.read.format("natskv")
            .option("servers", nats_server.url)
            .option("bucket", first)
            .load(second)
            .collect()
        )
    except Exception as exc:
        assert "ClientValidationError" in str(exc), str(exc)[-2000:]
        return
    assert [row.value for row in rows] == [second.encode()], "read the 'bucket' option's bucket"


def test_a_natsobj_read_with_a_store_option_and_a_different_load_path_is_refused(
    spark: Any, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """The same for natsobj: ``.option("store", A).load(B)`` lists A."""
    first, second = unique_name("sa"), unique_name("sb")

    async def fill() -> None:
        async with await jetstream.connect(nats_server.url) as js:
            for name in (first, second):
                store = await objstore.create_store(js, name)
                await store.put(name, b"x")

    _run(fill)
    objstore.spark.register(spark)
    try:
        rows = (
            spark.read.format("natsobj")
            .option("servers", nats_server.url)
            .option("store", first)
            .load(second)
            .collect()
        )
    except Exception as exc:
        assert "ClientValidationError" in str(exc), str(exc)[-2000:]
        return
    assert [row.name for row in rows] == [second], "listed the 'store' option's store"
