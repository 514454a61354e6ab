"""Hardening of KV writes and server limits: refused CAS cost, message and control-line
limits, get_many consistency. All on real servers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager

import nats
import pytest
from nats.aio.msg import Msg

import jetstream
import kvstore
import objstore
from kvstore import Bucket
from tests.conftest import BucketFactory
from tests.proxy import TcpProxy

# -- finding 11: a refused CAS costs one round trip -------------------------------------------


@asynccontextmanager
async def api_requests(
    js: jetstream.JetStream, url: str
) -> AsyncIterator[Callable[[], Awaitable[list[str]]]]:
    """Record the JetStream API requests (subjects) ``js`` sends while the block runs.

    The returned function waits until a sentinel request sent after the block's work has
    been seen (messages of one connection arrive in order), then returns what was recorded.
    """
    seen: list[str] = []
    sentinel = f"{js.api.info()}"
    monitor = await nats.connect(url)
    done = asyncio.Event()

    async def record(msg: Msg) -> None:
        if msg.subject == sentinel:
            done.set()
        else:
            seen.append(msg.subject)

    await monitor.subscribe(f"{js.api.prefix}.>", cb=record)
    await monitor.flush()

    async def collected() -> list[str]:
        await js.account_info()  # the sentinel
        await asyncio.wait_for(done.wait(), 5)
        return seen

    try:
        yield collected
    finally:
        await monitor.close()


async def test_refused_update_makes_no_lookup(
    bucket: Bucket, js: jetstream.JetStream, nats_server: jetstream.EmbeddedServer
) -> None:
    revision = await bucket.put("counter", b"1")
    await bucket.put("counter", b"2")
    async with api_requests(js, nats_server.url) as collected:
        with pytest.raises(kvstore.WrongRevisionError) as wrong:
            await bucket.update("counter", b"3", revision)
        requests = await collected()
    assert wrong.value.current == revision + 1
    # The write itself goes to $KV..., not the API: a refused first attempt is definite, so
    # neither a stream lookup nor a message-id scan may follow (both were made before).
    assert requests == []


async def test_refused_publish_with_msg_id_makes_no_lookup(
    bucket: Bucket, js: jetstream.JetStream, nats_server: jetstream.EmbeddedServer
) -> None:
    await bucket.put("k", b"v")
    async with api_requests(js, nats_server.url) as collected:
        with pytest.raises(jetstream.WrongLastSequenceError):
            await js.publish(
                f"$KV.{bucket.name}.k",
                b"w",
                headers={jetstream.headers.EXPECTED_LAST_SUBJECT_SEQUENCE: "0"},
                msg_id="refused-once",
            )
        assert await collected() == []


async def test_refused_create_reads_the_key_once(
    bucket: Bucket, js: jetstream.JetStream, nats_server: jetstream.EmbeddedServer
) -> None:
    await bucket.put("lock", b"held")
    async with api_requests(js, nats_server.url) as collected:
        with pytest.raises(kvstore.KeyExistsError):
            await bucket.create("lock", b"mine")
        requests = await collected()
    # create must tell a live value from a tombstone: one direct get, nothing more.
    assert requests == [f"{js.api.prefix}.DIRECT.GET.{bucket.stream}.$KV.{bucket.name}.lock"]


async def test_create_on_a_contended_key_asks_for_the_holder_alongside_the_write(
    bucket: Bucket, js: jetstream.JetStream, nats_server: jetstream.EmbeddedServer
) -> None:
    """A lock loop: after one refusal the key's last message is read together with the write,
    so later refusals cost one round trip; a released lock (tombstone) is still taken."""
    await bucket.put("lock", b"held")
    with pytest.raises(kvstore.KeyExistsError):
        await bucket.create("lock", b"mine")
    for _ in range(3):
        with pytest.raises(kvstore.KeyExistsError) as refused:
            await bucket.create("lock", b"mine")
        assert refused.value.revision == 1
    await bucket.delete("lock")
    revision = await bucket.create("lock", b"mine")  # over the tombstone
    assert (await bucket.get("lock")).revision == revision
    async with api_requests(js, nats_server.url) as collected:
        await bucket.create("fresh", b"v")  # never refused: no read at all
        requests = await collected()
    assert requests == []


# -- finding 9: the whole message against max_payload --------------------------------------------

SMALL_PAYLOAD = 8192


@pytest.fixture(scope="module")
def small_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[jetstream.EmbeddedServer]:
    """A server that takes messages of at most 8 KiB (headers + payload)."""
    config = tmp_path_factory.mktemp("small") / "nats.conf"
    config.write_text(f"max_payload: {SMALL_PAYLOAD}\n")
    with jetstream.EmbeddedServer(extra_args=["-c", str(config)]) as server:
        yield server


@pytest.fixture
async def small_js(small_server: jetstream.EmbeddedServer) -> AsyncIterator[jetstream.JetStream]:
    async with await jetstream.connect(small_server.url) as context:
        assert context.nc.max_payload == SMALL_PAYLOAD
        yield context


def block(*lines: tuple[str, int]) -> int:
    """Bytes of a header block with these (name, value length) lines: NATS/1.0 CRLF, lines,
    CRLF (written out here independently of the library)."""
    return len("NATS/1.0\r\n") + sum(len(n) + 2 + size + 2 for n, size in lines) + 2


async def alive(js: jetstream.JetStream, bucket: Bucket) -> None:
    """The connection survived: it is connected and still serves requests."""
    assert js.nc.is_connected
    await bucket.status()


async def test_put_with_ttl_fits_max_payload_to_the_byte(
    small_js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    bucket = await kvstore.create_bucket(small_js, unique_name("kv"))
    try:
        # put sends Nats-TTL: 3600 and Nats-Msg-Id: <22-char NUID>.
        fits = SMALL_PAYLOAD - block(("Nats-TTL", 4), ("Nats-Msg-Id", 22))
        revision = await bucket.put("k", b"x" * fits, ttl=3600)
        assert len((await bucket.get("k")).value) == fits
        with pytest.raises(kvstore.ValueTooLargeError, match="max_payload"):
            await bucket.put("k", b"x" * (fits + 1), ttl=3600)
        await alive(small_js, bucket)
        assert (await bucket.get("k")).revision == revision  # nothing was written
        with pytest.raises(kvstore.ValueTooLargeError):
            await bucket.update("k", b"x" * (fits + 1), revision, ttl=3600)
        with pytest.raises(kvstore.ValueTooLargeError):
            await bucket.create("new", b"x" * (fits + 1), ttl=3600)
        await alive(small_js, bucket)
    finally:
        await kvstore.delete_bucket(small_js, bucket.name)


async def test_put_many_fits_max_payload_to_the_byte(
    small_js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    bucket = await kvstore.create_bucket(small_js, unique_name("kv"))
    try:
        # The last message of a batch is the biggest: Nats-Msg-Id (the fence, <batch id>-2),
        # Nats-Batch-Id, Nats-Batch-Sequence: 2, Nats-Batch-Commit: 1.
        last = block(
            ("Nats-Msg-Id", 24),
            ("Nats-Batch-Id", 22),
            ("Nats-Batch-Sequence", 1),
            ("Nats-Batch-Commit", 1),
        )
        fits = SMALL_PAYLOAD - last
        await bucket.put_many({"a": b"a", "b": b"x" * fits})
        with pytest.raises(kvstore.ValueTooLargeError, match="max_payload"):
            await bucket.put_many({"c": b"c", "d": b"x" * (fits + 1)})
        await alive(small_js, bucket)
        snapshot = await bucket.get_many(["a", "b", "c", "d"])
        assert snapshot.missing == ("c", "d")  # the refused batch stored nothing
        with pytest.raises(jetstream.ValueTooLargeError):
            async with jetstream.AtomicBatch(small_js) as batch:
                batch.add(f"$KV.{bucket.name}.e", b"x" * SMALL_PAYLOAD)
        await alive(small_js, bucket)
    finally:
        await kvstore.delete_bucket(small_js, bucket.name)


async def test_object_chunks_fit_a_small_max_payload_with_ttl(
    small_js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    store = await objstore.create_store(small_js, unique_name("obj"))
    try:
        data = bytes(range(256)) * (3 * SMALL_PAYLOAD // 256 + 7)
        # chunk_size as large as the server allows, plus a TTL header on every chunk.
        info = await store.put("big", data, ttl=3600, chunk_size=SMALL_PAYLOAD)
        assert info.chunks >= 4
        assert await store.get_bytes("big") == data
        assert small_js.nc.is_connected
        plain = await store.put("plain", data)  # the default chunk size is 128 KiB
        assert plain.size == len(data)
        assert await store.get_bytes("plain") == data
    finally:
        await objstore.delete_store(small_js, store.name)


# -- finding 10: keys against the server's control line ------------------------------------------


async def test_keys_up_to_max_key_length_work_everywhere(
    bucket: Bucket, js: jetstream.JetStream
) -> None:
    longest = bucket.max_key_length
    assert 3800 < longest < jetstream.MAX_CONTROL_LINE
    key = "k" * longest
    revision = await bucket.put(key, b"v")
    assert (await bucket.get(key)).value == b"v"
    assert [e.revision async for e in bucket.history(key)] == [revision]
    async with bucket.watch(key) as watcher:
        entry = await anext(aiter(watcher))
    assert entry.key == key
    assert list(await bucket.get_many([key])) == [key]
    await bucket.put_many({key: b"w"})
    await bucket.delete(key)
    assert [k async for k in bucket.keys(key)] == []
    assert js.nc.is_connected


async def test_a_key_one_over_is_refused_before_sending(
    bucket: Bucket, js: jetstream.JetStream
) -> None:
    too_long = "k" * (bucket.max_key_length + 1)
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: bucket.put(too_long, b"v"),
        lambda: bucket.get(too_long),
        lambda: bucket.delete(too_long),
        lambda: bucket.purge(too_long),
        lambda: bucket.create(too_long, b"v"),
        lambda: bucket.update(too_long, b"v", 1),
        lambda: bucket.get_many([too_long]),
        lambda: bucket.put_many({too_long: b"v"}),
    ]
    for call in calls:
        with pytest.raises(kvstore.InvalidKeyError, match="control line"):
            await call()
    with pytest.raises(kvstore.InvalidKeyError, match="control line"):
        bucket.watch(too_long)
    with pytest.raises(kvstore.InvalidKeyError, match="control line"):
        bucket.history(too_long)
    with pytest.raises(kvstore.InvalidKeyError, match="control line"):
        bucket.keys([f"{too_long}.>"])
    # The 4100-character key of the report: refused, and the connection is fine.
    with pytest.raises(kvstore.InvalidKeyError):
        await bucket.put("k" * 4100, b"v")
    assert js.nc.is_connected
    assert await bucket.put("short", b"v") > 0


async def test_publish_refuses_a_subject_the_control_line_cannot_hold(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("LONG")
    await js.add_stream(jetstream.StreamConfig(name=name, subjects=[f"{name}.>"]))
    try:
        room = jetstream.subject_room(js.nc)
        fits = f"{name}." + "s" * (room - len(name) - 1)
        ack = await js.publish(fits, b"x" * 100, msg_id="m" * 64)  # headers, reply, sizes
        assert ack.seq == 1
        with pytest.raises(jetstream.ClientValidationError, match="control line"):
            await js.publish(fits + "s", b"x")
        assert js.nc.is_connected
        assert (await js.stream_info(name)).state.messages == 1
    finally:
        await js.delete_stream(name)


# -- finding 8: get_many of any size is one point in time ----------------------------------------

RECORD_KEYS = 100  # keys per record; a record is always written whole by one put_many


@pytest.mark.parametrize(("size", "trials"), [(1500, 12), (5000, 6)])
async def test_big_get_many_is_consistent_under_concurrent_put_many(
    make_bucket: BucketFactory, size: int, trials: int
) -> None:
    """A writer keeps rewriting whole records (every key of a record carries the record's
    version) on a history-1 bucket; every read must see every key (none is ever deleted) and
    each record at one version."""
    bucket = await make_bucket(history=1)
    keys = [f"r{i // RECORD_KEYS}.f{i % RECORD_KEYS}" for i in range(size)]
    records = [keys[i : i + RECORD_KEYS] for i in range(0, size, RECORD_KEYS)]
    for start in range(0, size, 1000):
        await bucket.put_many({key: b"0" for key in keys[start : start + 1000]})
    done = asyncio.Event()
    writes = 0

    async def write() -> None:
        nonlocal writes
        version = 0
        while not done.is_set():
            version += 1
            for record in records:
                await bucket.put_many({key: str(version).encode() for key in record})
                writes += 1

    overlapped = 0

    async def read(trials: int) -> list[str]:
        nonlocal overlapped
        problems = []
        for _ in range(trials):
            before = writes
            snapshot = await bucket.get_many(keys)
            overlapped += writes > before  # the writer really ran during the read
            if snapshot.missing:
                problems.append(f"{len(snapshot.missing)} live keys missing")
            for record in records:
                versions = {snapshot[k].value for k in record if k in snapshot}
                if len(versions) > 1:
                    problems.append(f"record {record[0]} torn: {sorted(versions)}")
        return problems

    writer = asyncio.create_task(write())
    try:
        problems = await read(trials)
    finally:
        done.set()
        await writer
    assert problems == []
    # Most reads overlap a write (a fast read can finish between two of the writer's acks).
    assert overlapped >= trials // 2, f"only {overlapped} of {trials} reads overlapped a write"


async def test_an_update_whose_ack_was_lost_is_stored_once(
    nats_server: jetstream.EmbeddedServer, make_bucket: BucketFactory
) -> None:
    """The retried path still resolves: the first attempt's ack is dropped, the retry (same
    Nats-Msg-Id) learns that it was stored, and the update returns its revision."""
    bucket = await make_bucket(history=5)
    revision = await bucket.put("k", b"1")
    proxy = await TcpProxy(nats_server.port).start()
    try:
        async with await jetstream.connect(proxy.url, timeout=0.5) as proxied:
            lossy = await kvstore.open_bucket(proxied, bucket.name)

            def lose_the_ack(chunk: bytes) -> bool:
                if f"$KV.{bucket.name}.k".encode() in chunk:
                    if proxy.drop_to_client:
                        proxy.drop_to_client = False  # the retry: let its answer through
                        proxy.on_client_bytes = None
                    else:
                        proxy.drop_to_client = True  # stored, but its ack is lost
                return True

            proxy.on_client_bytes = lose_the_ack
            new = await lossy.update("k", b"2", revision)
    finally:
        await proxy.close()
    assert [e.revision async for e in bucket.history("k")] == [revision, new]
    assert (await bucket.get("k")).value == b"2"
