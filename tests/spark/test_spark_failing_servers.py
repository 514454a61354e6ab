"""Spark jobs against a server that is dead, dies mid-write or stops answering mid-read fail with
the real, typed error in bounded time (a dead server within seconds, a paused one within the
retry deadline), and a failed task's abort reports what it had stored."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
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
from jetstream._options import run_sync  # noqa: E402
from tests.proxy import TcpProxy  # noqa: E402

pytestmark = pytest.mark.spark


def _run(factory: Callable[[], Any]) -> Any:
    return run_sync(factory)


async def _bucket(url: str, name: str) -> None:
    async with await jetstream.connect(url) as js:
        await kvstore.create_bucket(js, name)


async def _messages(url: str, stream: str) -> int:
    async with await jetstream.connect(url) as js:
        return (await js.stream_info(stream)).state.messages


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_BOUND = 90.0  # seconds a task may take to notice a server that stopped answering
# A task's wait bounded as a user would: with the defaults (5 s, 20 s) each job took ~50 s.
_BOUNDED = {"requestTimeout": "1", "retryDeadline": "3"}


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


def _timed_out_within_the_options(error: BaseException | None) -> bool:
    """The task's RequestTimeoutError, after the retryDeadline of ``_BOUNDED`` (the ordered
    consumer gives up recreating itself after it)."""
    text = str(error)
    deadline = _BOUNDED["retryDeadline"]
    return "jetstream._errors.RequestTimeoutError" in text and f"reset_deadline {deadline}s" in text


async def _fill_bucket(url: str, name: str, history: int = 1) -> None:
    async with await jetstream.connect(url) as js:
        bucket = await kvstore.create_bucket(js, name, history=history)
        await bucket.put_many({f"k{i}": b"v" for i in range(50)})


def test_a_dead_server_fails_the_job_within_seconds_with_the_real_error(
    spark: Any, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """Was 120 s (nats-py's reconnect budget) whatever connectTimeout said."""
    name = unique_name("sd")
    _run(lambda: _bucket(nats_server.url, name))
    df = spark.createDataFrame([("a", b"1")], "key string, value binary")
    started = time.monotonic()  # the same job against a live server: Spark's own overhead
    df.write.format("natskv").mode("append").option("servers", nats_server.url).save(name)
    overhead = time.monotonic() - started
    url = f"nats://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(Exception, match="ConnectionFailedError") as caught:
        df.write.format("natskv").mode("append").option("servers", url).option(
            "connectTimeout", "1"
        ).option("connectAttempts", "2").save("b")
    elapsed = time.monotonic() - started
    assert "ConnectionReconnectingError" not in str(caught.value)
    assert elapsed - overhead <= 15, f"the job failed after {elapsed:.1f} s ({overhead:.1f} s)"


def test_a_failed_task_reports_what_it_stored_and_abort_counts_it(
    spark: Any,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The abort log said "0 keys in 0 batches" while failed tasks had stored keys."""
    name = unique_name("sh")
    _run(lambda: _bucket(nats_server.url, name))
    good = [(f"ok{i}", b"v") for i in range(1500)]
    df = spark.createDataFrame([*good, ("not a key", b"v")], "key string, value binary")
    options = {"servers": nats_server.url, "bucket": name}
    writer = kvstore.spark.KVDataSource(options).writer(df.schema, False)  # start = 0
    with pytest.raises(Exception, match="invalid key") as caught:
        df.coalesce(1).write.format("natskv").mode("append").options(**options).save()
    assert "this task stored 1000 keys in 1 atomic batches" in str(caught.value)
    with caplog.at_level(logging.WARNING, logger="kvstore.spark"):
        writer.abort([None])  # what Spark hands abort when the only task failed
    (record,) = [r for r in caplog.records if "aborted" in r.getMessage()]
    assert "0 of 1 tasks succeeded, 1 failed" in record.getMessage()
    assert "failed ones included, stored at most 1000 revisions (1..1000" in record.getMessage()


def test_a_server_dying_mid_write_shows_the_write_error_not_a_close_error(
    spark: Any, unique_name: Callable[[str], str]
) -> None:
    """Was nats' ConnectionReconnectingError, raised by close() over the real error. The job
    runs in a second Python thread: register() there makes the formats visible to it (was
    DATA_SOURCE_NOT_FOUND: Spark looks formats up in the thread's active session)."""
    import threading

    name = unique_name("sh")
    with jetstream.EmbeddedServer() as server:
        _run(lambda: _bucket(server.url, name))
        df = spark.range(300_000).selectExpr(
            "concat('k', id) as key", "cast(cast(id as string) as binary) as value"
        )
        errors: list[BaseException] = []

        def write() -> None:
            try:
                kvstore.spark.register(spark)  # this thread's active session: see register
                df.coalesce(1).write.format("natskv").mode("append").options(**_BOUNDED).option(
                    "servers", server.url
                ).save(name)
            except BaseException as exc:
                errors.append(exc)

        writer = threading.Thread(target=write)
        writer.start()
        deadline = time.monotonic() + 60
        while _run(lambda: _messages(server.url, f"KV_{name}")) < 1000:
            assert writer.is_alive() and time.monotonic() < deadline, [
                str(e)[-3000:] for e in errors
            ]
            time.sleep(0.02)
        server.kill()
        writer.join(timeout=90)
        assert not writer.is_alive(), "the job did not end"
    (error,) = errors
    text = str(error)
    assert "ConnectionReconnectingError" not in text.split("closing the connection")[0]
    assert "natskv: this task stored" in text
    real = ("CommitUnknownError", "RequestTimeoutError", "NoRespondersError")
    assert any(f"jetstream._errors.{name}" in text for name in real), text[-2000:]


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
                spark.read.format("natskv").options(**_BOUNDED).option("servers", url).option(
                    "numPartitions", "1"
                ).load("paused1").collect()

            elapsed, error = _outcome_within(spark, server, read, _BOUND)
    assert elapsed < _BOUND, f"the read job was still running after {elapsed:.0f} s"
    assert _timed_out_within_the_options(error), str(error)[-2000:]


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
                    .options(**_BOUNDED)
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
    assert _timed_out_within_the_options(error), str(error)[-2000:]


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
                spark.read.format("natsobj").options(**_BOUNDED).option("servers", url).load(
                    "paused3"
                ).collect()

            elapsed, error = _outcome_within(spark, server, read, _BOUND)
    assert elapsed < _BOUND, f"the natsobj read was still running after {elapsed:.0f} s"
    assert _timed_out_within_the_options(error), str(error)[-2000:]
