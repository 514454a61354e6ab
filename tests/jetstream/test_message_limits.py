"""Messages fit the server's limits to the byte, whichever API writes them: the whole message
(headers included) against ``max_payload`` for puts with a TTL, batches and object chunks, keys
up to the longest a subject may carry, and subjects the control line cannot hold refused before
sending (the server would close the connection)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest

import jetstream
import kvstore
import objstore
from jetstream._protocol.limits import MAX_CONTROL_LINE, subject_room
from kvstore import Bucket

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


async def test_a_batch_write_too_large_for_its_place_is_refused_when_queued(
    small_js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    """A value that fits ``max_payload`` alone but not with the batch headers its message
    carries is refused by ``put`` / ``prepare_many``, so a set of prepared batches holds no
    write that fails after earlier batches were stored."""
    bucket = await kvstore.create_bucket(small_js, unique_name("kv"))
    try:
        first = block(("Nats-Batch-Id", 22), ("Nats-Batch-Sequence", 1))
        batch = bucket.batch()
        batch.put("a", b"x" * (SMALL_PAYLOAD - first))  # fits as the batch's first message
        with pytest.raises(kvstore.ValueTooLargeError, match="max_payload"):
            batch.put("b", b"x" * (SMALL_PAYLOAD - first + 1))  # one byte more does not
        with pytest.raises(kvstore.ValueTooLargeError, match="max_payload"):
            bucket.prepare_many({"c": b"x" * (SMALL_PAYLOAD - first + 1), "d": b"d"})
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


async def test_keys_up_to_max_key_length_work_everywhere(
    bucket: Bucket, js: jetstream.JetStream
) -> None:
    longest = bucket.max_key_length
    assert 3800 < longest < MAX_CONTROL_LINE
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
        room = subject_room(js.nc)
        fits = f"{name}." + "s" * (room - len(name) - 1)
        ack = await js.publish(fits, b"x" * 100, msg_id="m" * 64)  # headers, reply, sizes
        assert ack.seq == 1
        with pytest.raises(jetstream.ClientValidationError, match="control line"):
            await js.publish(fits + "s", b"x")
        assert js.nc.is_connected
        assert (await js.stream_info(name)).state.messages == 1
    finally:
        await js.delete_stream(name)
