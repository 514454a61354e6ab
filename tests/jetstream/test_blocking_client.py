"""The blocking client (``jetstream.sync``): one handle shared by many threads, usable inside
a running event loop (a notebook cell), Ctrl-C that cancels the waiting operation, iterators
that stop what they hold open when left, a refusal instead of a deadlock or a hang (from its
own loop thread, after a fork, after close), and no thread left behind."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

import jetstream
import jetstream.sync
import kvstore
import kvstore.sync

pytestmark = pytest.mark.integration


@pytest.fixture
def sync_bucket(
    sync_js: jetstream.sync.JetStream, unique_name: Callable[[str], str]
) -> Iterator[kvstore.sync.Bucket]:
    bucket = kvstore.sync.create_bucket(sync_js, unique_name("b"), history=5)
    yield bucket
    kvstore.sync.delete_bucket(sync_js, bucket.name)


def _consumers(js: jetstream.sync.JetStream, stream: str) -> list[str]:
    return list(js.consumer_names(stream))


def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def _blocked_in_a_call(thread_id: int) -> bool:
    """Whether the thread waits inside the portal for an operation's result (or for the next
    item an iterator's reader hands over)."""
    frame = sys._current_frames().get(thread_id)
    while frame is not None:
        code = frame.f_code
        if code.co_name in ("_wait", "take") and code.co_filename.endswith("portal.py"):
            return True
        frame = frame.f_back
    return False


def test_one_handle_shared_by_a_thread_pool(sync_bucket: kvstore.sync.Bucket) -> None:
    def write(n: int) -> int:
        return sync_bucket.put(f"k.{n % 10}", str(n).encode())

    with ThreadPoolExecutor(8) as pool:
        revisions = list(pool.map(write, range(400)))
    assert sorted(revisions) == list(range(1, 401))  # every put stored once, none lost
    assert sorted(sync_bucket.keys()) == [f"k.{n}" for n in range(10)]


def test_usable_inside_a_running_event_loop(sync_bucket: kvstore.sync.Bucket) -> None:
    """A notebook cell runs in a loop: ``asyncio.run`` there fails, the blocking client not."""

    async def cell() -> bytes:
        sync_bucket.put("k", b"from a running loop")
        return sync_bucket.get("k").value

    assert asyncio.run(cell()) == b"from a running loop"


def test_a_blocking_call_from_its_own_loop_thread_is_refused_not_a_deadlock(
    sync_js: jetstream.sync.JetStream, sync_bucket: kvstore.sync.Bucket
) -> None:
    async def callback_on_the_loop() -> None:
        sync_bucket.get("k")  # a blocking call from a coroutine running on the handle's loop

    with pytest.raises(jetstream.WrongEventLoopError, match="await the async API"):
        sync_js.portal.call(callback_on_the_loop())


def test_ctrl_c_in_a_waiting_call_cancels_it_and_raises_keyboard_interrupt(
    sync_js: jetstream.sync.JetStream, sync_bucket: kvstore.sync.Bucket
) -> None:
    """A watch waiting for the next change: Ctrl-C ends the wait at once, and the watch's
    consumer is deleted (nothing keeps running on the loop or the server)."""
    main = threading.get_ident()
    with sync_bucket.watch(updates_only=True) as watcher:
        assert len(_consumers(sync_js, sync_bucket.stream)) == 1

        def interrupt() -> None:
            _until(lambda: _blocked_in_a_call(main))
            signal.pthread_kill(main, signal.SIGINT)

        threading.Thread(target=interrupt).start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            next(iter(watcher))
        waited = time.monotonic() - started
    assert waited < 10  # not the watch's own timeouts
    assert _consumers(sync_js, sync_bucket.stream) == []
    assert sync_bucket.put("k", b"still usable") > 0


def test_leaving_an_iterator_early_stops_it_on_the_server(
    sync_js: jetstream.sync.JetStream, sync_bucket: kvstore.sync.Bucket
) -> None:
    sync_bucket.put_many({f"k.{n}": b"v" for n in range(20)})
    for _ in sync_bucket.keys():
        break  # the for loop closes nothing itself: the iterator is garbage now
    gc.collect()
    _until(lambda: _consumers(sync_js, sync_bucket.stream) == [])

    with sync_bucket.watch() as watcher:
        for _ in watcher:
            break
    assert _consumers(sync_js, sync_bucket.stream) == []

    keys = sync_bucket.keys()
    next(keys)
    keys.close()  # type: ignore[attr-defined]  # a BlockingIterator
    assert _consumers(sync_js, sync_bucket.stream) == []


def test_errors_are_the_async_api_classes(sync_bucket: kvstore.sync.Bucket) -> None:
    with pytest.raises(kvstore.KeyNotFoundError):
        sync_bucket.get("missing")
    sync_bucket.put("k", b"v")
    with pytest.raises(kvstore.WrongRevisionError):
        sync_bucket.update("k", b"w", revision=99)
    with pytest.raises(jetstream.WrongTypeError):
        sync_bucket.put("k", "not bytes")  # type: ignore[arg-type]


def test_close_ends_the_thread_and_later_calls_are_refused(
    nats_server: jetstream.EmbeddedServer,
) -> None:
    before = set(threading.enumerate())
    js = jetstream.sync.connect(nats_server.url)
    assert js.account_info() is not None
    js.close()
    js.close()  # idempotent
    assert set(threading.enumerate()) <= before
    with pytest.raises(jetstream.ConnectionClosedError):
        js.account_info()


def test_a_failed_connect_leaves_no_thread(nats_server: jetstream.EmbeddedServer) -> None:
    before = set(threading.enumerate())
    with pytest.raises(jetstream.ConnectionFailedError):
        jetstream.sync.connect("nats://127.0.0.1:1")
    assert set(threading.enumerate()) <= before


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_handle_used_after_fork_is_refused_with_the_fix(
    sync_bucket: kvstore.sync.Bucket,
) -> None:
    """Spark's Python workers and multiprocessing fork: the child has no loop thread, so a
    call could only hang. Exit codes carry the child's observation back."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        try:
            sync_bucket.get("k")
            message = b"no error"
        except jetstream.UsedAfterForkError as exc:
            message = str(exc).encode()
        except BaseException as exc:
            message = repr(exc).encode()
        os.write(write, message)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read().decode()
    os.waitpid(pid, 0)
    assert "before a fork" in message and "jetstream.sync.connect" in message, message
    assert sync_bucket.put("k", b"the parent goes on") > 0


def test_ctrl_c_in_a_waiting_request_cancels_it(
    sync_js: jetstream.sync.JetStream, unique_name: Callable[[str], str]
) -> None:
    """``next()`` on an empty consumer waits for its timeout (60 s here); Ctrl-C ends it."""
    stream = unique_name("S")
    sync_js.add_stream(jetstream.StreamConfig(name=stream, subjects=[f"{stream}.>"]))
    try:
        consumer = sync_js.create_consumer(
            stream, jetstream.ConsumerConfig(durable_name="w", ack_policy="explicit")
        )
        main = threading.get_ident()

        def interrupt() -> None:
            _until(lambda: _blocked_in_a_call(main))
            signal.pthread_kill(main, signal.SIGINT)

        threading.Thread(target=interrupt).start()
        with pytest.raises(KeyboardInterrupt):
            consumer.next(timeout=60)
        sync_js.publish(f"{stream}.a", b"after")
        assert consumer.next(timeout=10).data == b"after"  # the handle works on
    finally:
        sync_js.delete_stream(stream)
