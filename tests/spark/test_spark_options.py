"""What the Spark formats build on, without Spark: string connection options, the connection
session that never lets close() hide the real error, and upload_many's per-job rules."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import jetstream
import objstore
from jetstream._consume.scan import scan_stream
from jetstream._options import ConnectionOptions, check_options, run_sync
from objstore._many import UploadItem, upload_many


async def _until(condition: Callable[[], bool], deadline: float = 10.0) -> None:
    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, "condition not reached in time"
        await asyncio.sleep(0.02)


def test_unknown_options_are_refused_and_names_compare_loosely() -> None:
    known = ("servers", "batchSize")
    check_options({"SERVERS": "x", "batchsize": "1", "batch_size": "2"}, known, "t")
    expected = r"'bacth'; known options: batchSize, servers"
    with pytest.raises(jetstream.ClientValidationError, match=expected):
        check_options({"bacth": "1"}, known, "t")
    options = ConnectionOptions.from_strings(
        {"servers": "nats://127.0.0.1:1", "connect_timeout": "0.5", "connectattempts": "3"}
    )
    assert (options.connect_timeout, options.connect_attempts) == (0.5, 3)
    for bad in ({"connectTimeout": "0"}, {"connectTimeout": "nan"}, {"connectAttempts": "0"}):
        with pytest.raises(jetstream.ClientValidationError, match="connect"):
            ConnectionOptions.from_strings({"servers": "nats://x:1", **bad})


async def test_request_timeout_and_retry_deadline_reach_the_connection(
    nats_server: jetstream.EmbeddedServer,
) -> None:
    """A task's wait on a server that stopped answering was our defaults' (5 s per request,
    20 s of retries: ~50 s for a Spark read), whatever the job could afford."""
    options = ConnectionOptions.from_strings(
        {"servers": nats_server.url, "requestTimeout": "0.5", "retry_deadline": "3"}
    )
    async with options.session() as js:
        assert (js.timeout, js.retry_deadline) == (0.5, 3.0)
    for name in ("requestTimeout", "retryDeadline"):
        for bad in ("0", "-1", "inf", "nan", "5s", ""):
            with pytest.raises(jetstream.ClientValidationError, match=f"option '{name}'"):
                ConnectionOptions.from_strings({"servers": nats_server.url, name: bad})


async def test_a_dead_address_fails_within_the_connect_options() -> None:
    """Was 120 s (nats-py's reconnect budget) whatever connectTimeout said."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"nats://127.0.0.1:{sock.getsockname()[1]}"  # bound, never listening
    options = ConnectionOptions.from_strings(
        {"servers": url, "connectTimeout": "1", "connectAttempts": "2"}
    )
    started = time.monotonic()
    with pytest.raises(jetstream.ConnectionFailedError):
        async with options.session():
            pass
    assert time.monotonic() - started < 5


async def test_a_failing_close_never_hides_the_error_that_ended_the_block() -> None:
    """The server dies mid-job: closing then fails (nats-py refuses to drain while
    reconnecting); the job's own error must be the one raised, and the client closed."""
    with jetstream.EmbeddedServer() as server:
        options = ConnectionOptions.from_strings({"servers": server.url})
        with pytest.raises(LookupError, match="the job's own error"):
            async with options.session() as js:
                server.stop()
                await _until(lambda: js.nc.is_reconnecting)
                raise LookupError("the job's own error")
        assert js.nc.is_closed


async def test_upload_many_refuses_repeated_names_before_uploading(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
) -> None:
    name = unique_name("um")
    await objstore.create_store(js, name)
    options = ConnectionOptions.from_strings({"servers": nats_server.url})
    items = [UploadItem(f"n{i % 3}", data=bytes(1000)) for i in range(5)]
    with pytest.raises(objstore.DuplicateObjectNameError) as caught:
        await upload_many(options, name, items, concurrency=4, chunk_size=128)
    assert caught.value.names == ("n0", "n1")
    assert (await js.stream_info(f"OBJ_{name}")).state.messages == 0, "nothing uploaded"


async def test_upload_many_reports_a_missing_store_on_every_row(
    nats_server: jetstream.EmbeddedServer,
) -> None:
    options = ConnectionOptions.from_strings({"servers": nats_server.url})
    items = [UploadItem("a", data=b"1"), UploadItem("b", data=b"2")]
    outcomes = await upload_many(options, "nosuchstore", items)
    assert [o.name for o in outcomes] == ["a", "b"]
    assert all(o.error and "StoreNotFoundError" in o.error for o in outcomes)
    assert all("nosuchstore" in (o.error or "") for o in outcomes)


async def test_upload_many_encrypts_with_a_keyring(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
) -> None:
    name = unique_name("ume")
    await objstore.create_store(js, name)
    options = ConnectionOptions.from_strings({"servers": nats_server.url})
    ring = jetstream.Keyring({"k1": jetstream.Keyring.new_key()}, primary="k1")
    with pytest.raises(jetstream.ClientValidationError):
        await upload_many(options, name, [UploadItem("x", data=b"1")], encryption="key")  # type: ignore[arg-type]
    items = [UploadItem(f"o{i}", data=b"plaintext!" * 300) for i in range(3)]
    outcomes = await upload_many(options, name, items, chunk_size=1000, encryption=ring)
    assert all(o.error is None for o in outcomes), outcomes
    chunks = [
        m.data
        async for m in scan_stream(js, f"OBJ_{name}", [f"$O.{name}.C.>"], last_per_subject=False)
    ]
    assert len(chunks) == sum(o.chunks or 0 for o in outcomes) >= 3
    assert all(b"plaintext!" not in c for c in chunks)
    store = await objstore.open_store(js, name, encryption=ring)
    assert await store.get_bytes("o1") == b"plaintext!" * 300


def test_natskv_key_filters_drop_covered_ones_and_refuse_partial_overlaps() -> None:
    """The server refuses a consumer whose filters overlap: history-1 and stream reads of
    ``keys=a.>,a.b`` failed inside the tasks (10138)."""
    from kvstore import InvalidKeyError
    from kvstore.spark._options import parse_options

    opts = parse_options(
        {"bucket": "b", "servers": "nats://127.0.0.1:1", "keys": "a.>, a.b,a.>"}, "read"
    )
    assert opts.filters == ("a.>",)
    with pytest.raises(InvalidKeyError, match="overlap"):
        parse_options(
            {"bucket": "b", "servers": "nats://127.0.0.1:1", "keys": "a.*.c,a.b.>"}, "stream"
        )


def test_a_stream_batch_has_no_partitions_for_sequences_the_bucket_dropped(
    nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """History 1, one key written 50 times: only sequence 50 is stored. A micro-batch from
    ``earliest`` (or an old checkpoint) covered 1..50 with a partition (and a consumer) per
    10 sequences, all but the last empty."""
    import kvstore
    from kvstore.spark import KVStreamReader
    from kvstore.spark._options import parse_options

    name = unique_name("drop")

    async def fill() -> None:
        async with await jetstream.connect(nats_server.url) as js:
            bucket = await kvstore.create_bucket(js, name)
            for i in range(50):
                await bucket.put("k", str(i).encode())

    run_sync(fill)
    opts = parse_options(
        {"bucket": name, "servers": nats_server.url, "seqsPerPartition": "10"}, "stream"
    )
    reader = KVStreamReader(opts, ())
    try:
        assert [(p.first, p.last) for p in reader.partitions({"seq": 0}, {"seq": 50})] == [(50, 50)]
        assert len(reader.partitions({"seq": 49}, {"seq": 50})) == 1
    finally:

        async def drop() -> None:
            async with await jetstream.connect(nats_server.url) as js:
                await kvstore.delete_bucket(js, name)

        run_sync(drop)


async def test_upload_many_takes_a_numpy_int_concurrency(
    nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """``concurrency=np.int64(2)`` (a value from a DataFrame or a config parsed by numpy) was
    taken before the change (``concurrency < 1``); check_count now refuses every int-like that
    is not a Python int with WrongTypeError. An int-like (``__index__``) is an int."""
    np = pytest.importorskip("numpy")
    import objstore
    from objstore._many import UploadItem, upload_many

    async with await jetstream.connect(nats_server.url) as js:
        await objstore.create_store(js, "review9np")
    path = tmp_path / "f"
    path.write_bytes(b"y" * 3000)
    connection = ConnectionOptions.from_strings({"servers": nats_server.url})
    outcomes = await upload_many(
        connection, "review9np", [UploadItem(name="b", path=str(path))], concurrency=np.int64(2)
    )
    assert [(o.name, o.size, o.error) for o in outcomes] == [("b", 3000, None)]
