"""Connections at their edges, on real servers: closing in any state (finding 12), every call on
a closed context raising jetstream.ConnectionClosedError (13), a bounded first connect that names
its cause (14), and request errors that say what was retried for how long (15)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import logging
import socket
import ssl
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import jetstream
import kvstore
import objstore
from jetstream import ConsumerConfig, StreamConfig
from tests.security.pki import make_pki

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _collect() -> Iterator[None]:
    """A socket left open shows as a ResourceWarning (an error) in the test that leaked it."""
    yield
    gc.collect()


@pytest.fixture
def own_server() -> Iterator[jetstream.EmbeddedServer]:
    """A server of the test's own, to kill or pause without disturbing the session's."""
    with jetstream.EmbeddedServer() as server:
        yield server


async def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nobody listens once the socket is closed


# -- 12: close() in any state -----------------------------------------------------------------


async def test_leaving_the_block_while_reconnecting_closes_for_good(
    own_server: jetstream.EmbeddedServer,
) -> None:
    reconnects: list[int] = []

    async def reconnected() -> None:
        reconnects.append(1)

    js = await jetstream.connect(
        own_server.url,
        reconnect_time_wait=0.05,
        max_reconnect_attempts=-1,
        reconnected_cb=reconnected,
    )
    async with js:
        await js.account_info()
        own_server.kill()
        await _until(lambda: js.nc.is_reconnecting)
    # Leaving the block neither raised (it raised ConnectionReconnectingError) nor left it open.
    assert js.nc.is_closed and js.is_closed
    own_server.start()  # same port: a client that still tried would reconnect now
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:  # a negative: give a live reconnect loop its chance
        assert not reconnects and js.nc.is_closed
        await asyncio.sleep(0.05)
    with pytest.raises(jetstream.ConnectionClosedError):
        await js.account_info()


async def test_close_never_raises_and_is_bounded_whatever_the_state(
    own_server: jetstream.EmbeddedServer,
) -> None:
    # A server that stopped answering (paused): the drain cannot finish, close still returns.
    js = await jetstream.connect(own_server.url, timeout=1.0, allow_reconnect=False)
    own_server.pause()
    try:
        started = time.monotonic()
        await js.close()
        assert time.monotonic() - started < 4.0
        assert js.nc.is_closed
    finally:
        own_server.resume()
    await js.close()  # twice: nothing happens
    # A connection the server dropped for good (no reconnect allowed): closed already.
    js = await jetstream.connect(own_server.url, allow_reconnect=False)
    own_server.kill()
    await _until(lambda: js.nc.is_closed)
    async with js:
        pass
    assert js.is_closed


async def test_close_with_a_watch_on_a_paused_server_is_bounded_and_logs_nothing(
    own_server: jetstream.EmbeddedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """helper-40: with subscriptions open (a watch, the reply inbox), nats-py's drain swallows
    the cancel that ends it and waits out its own 10 s flush; close() took 11 s and asyncio
    logged "_GatheringFuture exception was never retrieved" (the CLI printed it on Ctrl-C)."""
    js = await jetstream.connect(own_server.url, timeout=0.5, allow_reconnect=False)
    bucket = await kvstore.create_bucket(js, "pausedclose")
    await bucket.put("k", b"v")
    watcher = bucket.watch()
    await watcher.__aenter__()
    assert (await watcher.__anext__()).key == "k"
    own_server.pause()
    try:
        started = time.monotonic()
        with caplog.at_level(logging.DEBUG):
            await js.close()
            await asyncio.sleep(0)
            gc.collect()  # a future dropped with its exception unretrieved is logged now
        assert time.monotonic() - started < 3.0
        assert js.nc.is_closed
    finally:
        own_server.resume()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
    with contextlib.suppress(Exception):
        await watcher.__aexit__(None, None, None)


# -- 13: every public call on a closed context ------------------------------------------------


async def _drive(result: Any) -> None:
    """Make a call do its I/O: await it, enter it, or take its first item."""
    if inspect.isawaitable(result):
        result = await result
        if not hasattr(result, "__aenter__") and not hasattr(result, "__anext__"):
            return
    if hasattr(result, "__aenter__"):
        async with result as entered:
            if hasattr(entered, "__anext__"):
                await entered.__anext__()
        return
    if hasattr(result, "__anext__"):
        await result.__anext__()
        return
    raise AssertionError(f"{result!r} does no I/O: list it in NO_IO")


def _public_methods(cls: type) -> list[str]:
    return sorted(
        name
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_")
        and callable(member)
        and not isinstance(inspect.getattr_static(cls, name), property)
    )


async def _assert_all_closed(
    obj: object, samples: dict[str, Any], no_io: set[str], overrides: dict[str, Any]
) -> list[str]:
    """Call every public method of ``obj`` with arguments taken from ``samples`` by parameter
    name; each must raise ConnectionClosedError. Returns the names checked."""
    checked = []
    for name in _public_methods(type(obj)):
        if name in no_io:
            continue
        method = getattr(obj, name)
        if name in overrides:
            call: Callable[[], Any] = overrides[name]
        else:
            params = inspect.signature(method).parameters.values()
            required = [
                p for p in params if p.default is p.empty and p.kind not in (p.VAR_KEYWORD,)
            ]
            missing = [p.name for p in required if p.name not in samples]
            assert not missing, f"{type(obj).__name__}.{name}: no sample for {missing}"
            args = {p.name: samples[p.name] for p in required}
            call = lambda method=method, args=args: method(**args)  # noqa: E731
        with pytest.raises(jetstream.ConnectionClosedError) as raised:
            await _drive(call())
        assert isinstance(raised.value, jetstream.JetStreamError), name
        checked.append(name)
    return checked


@pytest.fixture
async def closed_world(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
) -> AsyncIterator[dict[str, Any]]:
    """A bucket, a store, a stream with a consumer and a delivered message, all bound to a
    context that is then closed."""
    bucket_name, store_name, stream = unique_name("kv"), unique_name("os"), unique_name("S")
    await kvstore.create_bucket(js, bucket_name)
    await objstore.create_store(js, store_name)
    await js.add_stream(StreamConfig(name=stream, subjects=[f"{stream}.>"]))
    await js.publish(f"{stream}.a", b"1")
    await js.create_consumer(stream, ConsumerConfig(durable_name="c", ack_policy="explicit"))
    closed = await jetstream.connect(nats_server.url)
    world = {
        "js": closed,
        "stream": stream,
        "bucket": await kvstore.open_bucket(closed, bucket_name),
        "store": await objstore.open_store(closed, store_name),
        "consumer": await closed.consumer(stream, "c"),
    }
    world["message"] = await world["consumer"].next()
    await closed.close()
    yield world
    await kvstore.delete_bucket(js, bucket_name)
    await objstore.delete_store(js, store_name)
    await js.delete_stream(stream)


async def test_every_public_call_on_a_closed_context_raises_connection_closed(
    closed_world: dict[str, Any], tmp_path: Path
) -> None:
    closed: jetstream.JetStream = closed_world["js"]
    stream: str = closed_world["stream"]
    closed_error = jetstream.ConnectionClosedError
    assert issubclass(closed_error, jetstream.JetStreamError)
    assert issubclass(closed_error, ConnectionError)

    checked = await _assert_all_closed(
        closed,
        {
            "stream": stream,
            "name": "c",
            "subject": f"{stream}.a",
            "subjects": [f"{stream}.a"],
            "seq": 1,
            "data": b"x",
            "payload": b"x",
            "feature": jetstream.Feature.MESSAGE_TTL,
            "config": ConsumerConfig(durable_name="c2"),
            "consumer": "c",
            "group": "PCG",
            "until": None,
        },
        no_io={"close", "ensure_open", "check_loop", "note_error"},
        overrides={
            "add_stream": lambda: closed.add_stream(StreamConfig(name="X", subjects=["x"])),
            "update_stream": lambda: closed.update_stream(StreamConfig(name=stream)),
        },
    )
    assert {"publish", "send", "stream_names", "get_last_messages"} <= set(checked)

    bucket: kvstore.Bucket = closed_world["bucket"]
    checked = await _assert_all_closed(
        bucket,
        {
            "key": "k",
            "value": b"v",
            "revision": 1,
            "keys": ["k"],
            "items": {"k": b"v"},
        },
        # typed() makes a view; rekey() refuses a bucket without encryption= before any I/O;
        # decode_entry() decodes a message in hand
        no_io={"batch", "typed", "rekey", "decode_entry"},
        overrides={},
    )
    assert {"put", "get", "watch", "keys", "get_many", "put_many"} <= set(checked)
    key_batch = bucket.batch()
    key_batch.put("k", b"v")
    with pytest.raises(closed_error):
        await key_batch.commit()

    store: objstore.ObjectStore = closed_world["store"]
    checked = await _assert_all_closed(
        store,
        {
            "name": "o",
            "source": b"data",
            "target": "t",
            "store": store,
            "path": tmp_path / "o",
        },
        no_io={"rekey"},  # refuses a store without encryption= before any I/O
        overrides={},
    )
    assert {"put", "get_bytes", "get_file", "list", "watch", "open"} <= set(checked)

    consumer: jetstream.Consumer = closed_world["consumer"]
    checked = await _assert_all_closed(
        consumer, {}, no_io={"pin_id"}, overrides={"consume": lambda: consumer.consume()}
    )
    assert {"consume", "fetch", "next", "info"} <= set(checked)
    await _assert_all_closed(closed_world["message"], {}, no_io=set(), overrides={})

    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: _drive(jetstream.OrderedConsumer(closed, stream)),
        lambda: jetstream.OrderedConsumer(closed, stream).start(),
        lambda: jetstream.FastPublisher(closed).add(f"{stream}.a", b"x"),
        lambda: kvstore.create_bucket(closed, "nope"),
        lambda: kvstore.open_bucket(closed, "nope"),
        lambda: _drive(kvstore.list_buckets(closed)),
        lambda: objstore.create_store(closed, "nope"),
        lambda: objstore.open_store(closed, "nope"),
        lambda: _drive(objstore.list_stores(closed)),
    ]
    for call in calls:
        with pytest.raises(closed_error):
            await call()
    batch = jetstream.AtomicBatch(closed, stream=stream)
    batch.add(f"{stream}.a", b"x")
    with pytest.raises(closed_error):
        await batch.commit()


# -- 14: the first connect --------------------------------------------------------------------


async def test_a_closed_port_fails_at_once_names_the_cause_and_logs_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"nats://127.0.0.1:{_closed_port()}"
    caplog.set_level(logging.WARNING, logger="jetstream")
    started = time.monotonic()
    with pytest.raises(jetstream.ConnectionFailedError) as failed:  # took 120 s before
        await asyncio.wait_for(jetstream.connect(url), 30)
    assert time.monotonic() - started <= 5.0
    assert "refused" in str(failed.value) and url in str(failed.value)
    lines = [r for r in caplog.records if r.name == "jetstream"]
    assert len(lines) == 1, [r.getMessage() for r in lines]  # was ~60 warning lines
    assert "refused" in lines[0].getMessage()


async def test_connect_attempts_retry_the_first_connect(
    own_server: jetstream.EmbeddedServer,
) -> None:
    """Opting in: a server that comes up during the attempts is reached."""
    url = own_server.url
    own_server.stop()
    connecting = asyncio.create_task(
        jetstream.connect(url, connect_attempts=40, reconnect_time_wait=0.1)
    )
    await asyncio.sleep(0.3)  # let a few attempts fail first (not synchronisation: a head start)
    assert not connecting.done()
    own_server.start()
    async with await asyncio.wait_for(connecting, 20) as js:
        await js.account_info()
        assert js.nc.options["max_reconnect_attempts"] == 60, "reconnects keep nats-py's setting"


async def test_connect_attempts_are_counted(caplog: pytest.LogCaptureFixture) -> None:
    url = f"nats://127.0.0.1:{_closed_port()}"
    seen: list[Exception] = []

    async def error_cb(error: Exception) -> None:
        seen.append(error)

    with pytest.raises(jetstream.ConnectionFailedError, match="refused"):
        await jetstream.connect(
            url, connect_attempts=3, reconnect_time_wait=0.01, error_cb=error_cb
        )
    assert len([e for e in seen if isinstance(e, ConnectionRefusedError)]) == 3
    with pytest.raises(jetstream.ClientValidationError):
        await jetstream.connect(url, connect_attempts=0)


async def test_a_server_that_never_answers_times_out_within_connect_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            await reader.read()  # says nothing until the client hangs up
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        started = time.monotonic()
        with pytest.raises(jetstream.ConnectionFailedError, match="timed out"):
            await jetstream.connect(f"nats://127.0.0.1:{port}", connect_timeout=0.5)
        assert time.monotonic() - started < 3.0
    finally:
        server.close()
        await server.wait_closed()


# -- 15: what a retried request says ----------------------------------------------------------


async def test_a_request_during_an_outage_states_the_real_wait_and_the_retries(
    own_server: jetstream.EmbeddedServer, caplog: pytest.LogCaptureFixture
) -> None:
    async with await jetstream.connect(own_server.url, timeout=0.5, retry_deadline=2.0) as js:
        await js.add_stream(StreamConfig(name="OUT", subjects=["out.>"]))
        caplog.set_level(logging.DEBUG, logger="jetstream")
        own_server.pause()
        try:
            started = time.monotonic()
            with pytest.raises(jetstream.RequestTimeoutError) as timed_out:
                await js.stream_info("OUT")
            waited = time.monotonic() - started
        finally:
            own_server.resume()
        message = str(timed_out.value)
        # It said "no reply ... within 0.5s" after waiting 2.5 s.
        assert "STREAM.INFO.OUT" in message and "attempts: timeout x" in message, message
        stated = float(message.split("within ")[1].split("s ")[0])
        assert 2.0 <= stated <= waited
        retries = [r for r in caplog.records if "retrying" in r.getMessage()]
        assert retries and all(r.levelno == logging.DEBUG for r in retries)
        await js.delete_stream("OUT")


async def test_a_get_outlasting_one_timeout_is_asked_again_until_the_retry_deadline(
    own_server: jetstream.EmbeddedServer,
) -> None:
    """A direct get is a read, retried on timeout like every idempotent request. It was not:
    right after a leader was killed, one request routed to the dead replica's lingering
    interest failed ``bucket.get`` (CI, tests/faults ``test_ttl_expires_across_a_leader_kill``)."""
    async with await jetstream.connect(own_server.url, timeout=0.5, retry_deadline=10.0) as js:
        bucket = await kvstore.create_bucket(js, "getretry")
        await bucket.put("k", b"v")
        own_server.pause()
        try:
            getting = asyncio.ensure_future(bucket.get("k"))
            await asyncio.sleep(1.2)  # at least two timed-out attempts
            assert not getting.done()
        finally:
            own_server.resume()
        assert (await getting).value == b"v"
        await kvstore.delete_bucket(js, "getretry")


async def test_closing_a_context_ends_a_retrying_get_many_on_a_callers_connection(
    own_server: jetstream.EmbeddedServer,
) -> None:
    """helper-39: a get_many retrying timeouts kept asking through a closed context (around
    the caller's own nats-py client, which close() leaves open) until the retry deadline."""
    import nats

    nc = await nats.connect(own_server.url)
    js = jetstream.JetStream(nc, timeout=0.5, retry_deadline=10.0)
    try:
        bucket = await kvstore.create_bucket(js, "closeretry")
        await bucket.put("k", b"v")
        own_server.pause()
        try:
            reading = asyncio.ensure_future(bucket.get_many(["k"]))
            await asyncio.sleep(1.2)  # past the first timeout: retrying
            await js.close()
            started = time.monotonic()
            with pytest.raises(jetstream.ConnectionClosedError):
                await reading
            assert time.monotonic() - started < 1.0
        finally:
            own_server.resume()
        async with jetstream.JetStream(nc) as again:
            await kvstore.delete_bucket(again, "closeretry")
    finally:
        await nc.close()


async def test_stall_timeout_bounds_opening_an_object_on_a_paused_server(
    own_server: jetstream.EmbeddedServer,
) -> None:
    """helper-39: the meta record read before the reader exists retried until the retry
    deadline (11 s here, about 25 s with the defaults), whatever stall_timeout said."""
    async with await jetstream.connect(own_server.url, timeout=1.0, retry_deadline=10.0) as js:
        store = await objstore.create_store(js, "stallopen")
        await store.put("obj", b"x" * 1000)
        own_server.pause()
        try:
            started = time.monotonic()
            with pytest.raises(jetstream.RequestTimeoutError, match="stall_timeout"):
                await store.get_bytes("obj", stall_timeout=2.0)
            assert time.monotonic() - started < 3.0
        finally:
            own_server.resume()
        await objstore.delete_store(js, "stallopen")


# -- 19: no socket left behind by a failed reconnect attempt ----------------------------------


async def test_a_failed_reconnect_attempt_leaves_no_socket(
    own_server: jetstream.EmbeddedServer,
) -> None:
    """The cause of the flaky test_ttl_expires_across_a_full_restart: while nodes restart, a
    reconnect attempt can reach a port whose server does not complete the handshake; nats-py
    then reuses its transport for the next attempt without closing that socket."""
    port = own_server.port
    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # accepts, never sends INFO: the attempt times out

    async with await jetstream.connect(
        own_server.url, connect_timeout=0.2, reconnect_time_wait=0.05, max_reconnect_attempts=-1
    ) as js:
        own_server.kill()
        await _until(lambda: js.nc.is_reconnecting)
        impostor = await asyncio.start_server(silent, "127.0.0.1", port)
        await _until(lambda: len(accepted) >= 3)  # three attempts timed out waiting for INFO
        impostor.close()
        await impostor.wait_closed()
        for writer in accepted:  # the server side of each attempt
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        own_server.start()
        await _until(lambda: js.nc.is_connected)
        await js.account_info()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    leaks = [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert not leaks, [str(w.message) for w in leaks]


async def test_iterations_running_when_the_context_closes_end_with_connection_closed(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
) -> None:
    """A watch or consume waiting for messages does not wait forever once its context closes
    (it waited for a reconnect that never comes)."""
    name, stream = unique_name("kv"), unique_name("S")
    await kvstore.create_bucket(js, name)
    await js.add_stream(StreamConfig(name=stream, subjects=[f"{stream}.>"]))
    await js.create_consumer(stream, ConsumerConfig(durable_name="c"))
    other = await jetstream.connect(nats_server.url)
    bucket = await kvstore.open_bucket(other, name)
    consumer = await other.consumer(stream, "c")
    started = [asyncio.Event(), asyncio.Event()]

    async def watch() -> None:
        async with bucket.watch(updates_only=True) as watcher:
            started[0].set()
            async for _ in watcher:
                pass

    async def consume() -> None:
        async with consumer.consume() as messages:
            started[1].set()
            async for _ in messages:
                pass

    tasks = [asyncio.create_task(watch()), asyncio.create_task(consume())]
    try:
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started)), 5)
        await other.close()
        done, pending = await asyncio.wait(tasks, timeout=5)
        assert not pending, "an iteration still waits after close()"
        for task in done:
            assert isinstance(task.exception(), jetstream.ConnectionClosedError), task
    finally:
        for task in tasks:
            task.cancel()
        await other.close()
        await kvstore.delete_bucket(js, name)
        await js.delete_stream(stream)


async def test_a_refused_tls_handshake_fails_within_the_budget_and_says_tls(
    tmp_path: Path,
) -> None:
    """With default options (reconnects allowed) nats-py hung forever after the refusal."""
    pki = make_pki(tmp_path)
    config = tmp_path / "server.conf"
    config.write_text(f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}" }}\n')
    server = jetstream.EmbeddedServer(store_dir=tmp_path / "store", extra_args=["-c", str(config)])
    with server:
        started = time.monotonic()
        with pytest.raises(jetstream.ConnectionFailedError, match="TLS handshake failed"):
            untrusted = ssl.create_default_context()  # the system trust store lacks our CA
            await asyncio.wait_for(
                jetstream.connect(f"tls://127.0.0.1:{server.port}", tls=untrusted), 30
            )
        assert time.monotonic() - started <= 7.0  # the 5 s budget, then a 1 s close


async def test_frames_while_reconnecting_take_publish_checks(
    own_server: jetstream.EmbeddedServer,
) -> None:
    """Pre-encoded frames bypassed nats-py's checks: while reconnecting they were queued past
    the reconnect buffer's limit without an error. Now they go through publish, and a full
    buffer is a DisconnectedError (a JetStreamError); a closed client a ConnectionClosedError."""
    from jetstream._wire import publish_frames

    frames = [("s.a", {"h": "v"}, b"x" * 1000) for _ in range(10)]
    js = await jetstream.connect(
        own_server.url, pending_size=4096, reconnect_time_wait=0.05, max_reconnect_attempts=-1
    )
    async with js:
        await publish_frames(js.nc, frames)  # connected: the fast path
        own_server.kill()
        await _until(lambda: js.nc.is_reconnecting)
        with pytest.raises(jetstream.DisconnectedError):
            await publish_frames(js.nc, frames)
    with pytest.raises(jetstream.ConnectionClosedError):
        await publish_frames(js.nc, frames)


async def test_a_dead_server_in_the_list_is_skipped_and_kept_for_reconnects(
    nats_server: jetstream.EmbeddedServer,
) -> None:
    dead = f"nats://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    async with await jetstream.connect([dead, nats_server.url], dont_randomize=True) as js:
        assert time.monotonic() - started < 5.0
        await js.account_info()
        pool = {f"{s.uri.hostname}:{s.uri.port}" for s in js.nc._server_pool}
        assert dead.removeprefix("nats://") in pool, "the dead server stays in the pool"
