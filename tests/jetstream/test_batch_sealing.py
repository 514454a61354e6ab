"""Batches whose payloads are sealed while they are sent (an encrypted bucket's ``put_many``):
each message sealed once, in every commit mode, on a resend, and under cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

import jetstream
from jetstream import AtomicBatch, JetStream, StreamConfig
from jetstream._consume.scan import scan_stream
from tests.conftest import BucketFactory
from tests.proxy import TcpProxy

SEAL_OVERHEAD = 8


@pytest.fixture
async def stream(js: JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    name = unique_name("SB")
    await js.add_stream(
        StreamConfig(name=name, subjects=[f"{name}.>"], allow_atomic=True, allow_direct=True)
    )
    yield name
    await js.delete_stream(name)


class CountingSeal:
    """A stand-in seal that numbers its calls: sealing a payload twice would store other
    bytes than the first seal gave (as a fresh nonce does)."""

    def __init__(self, cancel_at: int | None = None) -> None:
        self.calls: list[str] = []
        self.cancel_at = cancel_at

    def __call__(self, subject: str, data: bytes) -> bytes:
        self.calls.append(subject)
        if len(self.calls) == self.cancel_at:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()  # delivered at the batch's next await
        return b"%08d" % len(self.calls) + data


async def _stored(js: JetStream, stream: str) -> list[jetstream.StoredMessage]:
    return [m async for m in scan_stream(js, stream, [f"{stream}.>"], last_per_subject=False)]


def _fill(batch: AtomicBatch, stream: str, count: int) -> None:
    """``count`` messages, every fifth one plain (as a KV tombstone is), the rest unsealed."""
    for i in range(count):
        batch._append(f"{stream}.k{i}", b"v%d" % i, {}, unsealed=i % 5 != 4)


@pytest.mark.parametrize("options", [{}, {"ack_every": 3}, {"commit_with": "eob"}])
async def test_every_unsealed_message_is_sealed_once_and_stored_sealed(
    js: JetStream, stream: str, options: dict[str, object]
) -> None:
    seal = CountingSeal()
    batch = AtomicBatch(js, seal=seal, seal_overhead=SEAL_OVERHEAD, **options)  # type: ignore[arg-type]
    _fill(batch, stream, 300)  # several slices
    ack = await batch.commit()
    stored = await _stored(js, stream)
    assert [m.seq for m in stored] == ack.sequences and len(stored) == 300
    assert sorted(seal.calls) == sorted(f"{stream}.k{i}" for i in range(300) if i % 5 != 4)
    for i, message in enumerate(stored):
        if i % 5 == 4:
            assert message.data == b"v%d" % i, "a message appended sealed is sent as it is"
        else:
            assert len(message.data) == len(b"v%d" % i) + SEAL_OVERHEAD
            assert message.data.endswith(b"v%d" % i)


async def test_a_resend_sends_the_bytes_sealed_the_first_time(
    nats_server: jetstream.EmbeddedServer, js: JetStream, stream: str
) -> None:
    proxy = await TcpProxy(nats_server.port).start()
    try:
        async with await jetstream.connect(
            proxy.url, timeout=0.5, reconnect_time_wait=0.1, max_reconnect_attempts=-1
        ) as proxied:

            def lose_the_commit(chunk: bytes) -> bool:
                if b"Nats-Batch-Commit" in chunk:
                    proxy.drop_to_server = True  # the commit and all after it are lost
                return not proxy.drop_to_server

            async def heal() -> None:
                await asyncio.sleep(1.5)
                proxy.drop_to_server = False
                proxy.on_client_bytes = None

            proxy.on_client_bytes = lose_the_commit
            healing = asyncio.create_task(heal())
            seal = CountingSeal()
            batch = AtomicBatch(
                proxied, stream=stream, deadline=20, seal=seal, seal_overhead=SEAL_OVERHEAD
            )
            _fill(batch, stream, 100)
            ack = await batch.commit()
            await healing
    finally:
        await proxy.close()
    assert ack.resolved and ack.batch_id != batch.batch_id, "committed by the resend"
    assert len(seal.calls) == 80, "each payload sealed once, however often it was sent"
    stored = await _stored(js, stream)
    assert len(stored) == 100
    sealed_payloads = [m.data[:8] for i, m in enumerate(stored) if i % 5 != 4]
    assert sorted(sealed_payloads) == [b"%08d" % n for n in range(1, 81)]


async def test_cancelled_while_sealing_leaves_no_task_and_stores_nothing(
    js: JetStream, stream: str
) -> None:
    seal = CountingSeal(cancel_at=70)  # past the first slice: while the first reply is due
    batch = AtomicBatch(js, seal=seal, seal_overhead=SEAL_OVERHEAD)
    _fill(batch, stream, 300)
    me = asyncio.current_task()
    before = asyncio.all_tasks()
    with pytest.raises(asyncio.CancelledError):
        await batch.commit()
    assert me is not None and me.uncancel() == 0
    assert asyncio.all_tasks() <= before, "the first message's request has ended too"
    assert await _stored(js, stream) == [], "an abandoned batch never commits"
    again = AtomicBatch(js)
    again.add(f"{stream}.after", b"v")
    assert (await again.commit()).count == 1


async def test_the_size_check_counts_the_seal_overhead(js: JetStream, stream: str) -> None:
    batch = AtomicBatch(js, seal=CountingSeal(), seal_overhead=SEAL_OVERHEAD)
    room = js.nc.max_payload - 200  # data that fits plain, but not once sealed with headers
    batch._append(f"{stream}.plain", b"x" * room, {})
    with pytest.raises(jetstream.ValueTooLargeError):
        batch._append(
            f"{stream}.big", b"x" * (js.nc.max_payload - SEAL_OVERHEAD), {}, unsealed=True
        )
    with pytest.raises(jetstream.ClientValidationError):
        AtomicBatch(js)._append(f"{stream}.a", b"v", {}, unsealed=True)


async def test_encrypted_put_many_over_several_slices_reads_back_and_stays_sealed(
    js: JetStream, make_bucket: BucketFactory
) -> None:
    ring = jetstream.Keyring({"k1": jetstream.Keyring.new_key()}, primary="k1")
    bucket = await make_bucket(encryption=ring, history=2)
    values = {f"key.{i}": f"secret {i}".encode() for i in range(500)}
    await bucket.put_many(values, ttl={"key.300": 60})
    async with bucket.batch() as batch:
        for i in range(200):
            batch.put(f"key.{i}", f"secret {i} v2".encode())
        batch.delete("key.499")
    snapshot = await bucket.get_many(values)
    expected = {**values, **{f"key.{i}": f"secret {i} v2".encode() for i in range(200)}}
    del expected["key.499"]
    assert {key: entry.value for key, entry in snapshot.items()} == expected
    assert snapshot.missing == ("key.499",)
    assert snapshot["key.300"].ttl == 60
    raw = await js.get_last_message(bucket.stream, f"$KV.{bucket.name}.key.3")
    assert raw.headers[jetstream.headers.ENCRYPTION] == "v1;k1"
    assert b"secret" not in raw.data, "a peer sees ciphertext"
    tombstone = await js.get_last_message(bucket.stream, f"$KV.{bucket.name}.key.499")
    assert tombstone.data == b"" and jetstream.headers.ENCRYPTION not in tombstone.headers


@pytest.mark.parametrize("steps", range(1, 7))
async def test_a_cancelled_encrypted_put_many_has_ended_everything_it_started(
    make_bucket: BucketFactory, steps: int
) -> None:
    """helper-37: the first message's request task outlived the cancelled put_many by two
    loop steps (a loop closed at once reported it destroyed while pending)."""
    ring = jetstream.Keyring({"k1": jetstream.Keyring.new_key()}, primary="k1")
    bucket = await make_bucket(encryption=ring)
    before = asyncio.all_tasks()
    call = asyncio.ensure_future(bucket.put_many({f"k.{i}": b"v" for i in range(300)}))
    for _ in range(steps):
        await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert asyncio.all_tasks() - before == set()
    snapshot = await bucket.get_many([f"k.{i}" for i in range(300)])
    assert len(snapshot) in (0, 300), "all of the record or none of it"


async def test_an_eob_batch_whose_last_message_outgrows_max_payload_sends_nothing(
    js: JetStream, stream: str
) -> None:
    """helper-37: with commit_with="eob" the last message's fence Msg-Id was never counted;
    a message add() accepted at the limit went out too large, and the server closed the
    connection (ConnectionClosedError, a "maybe"), instead of ValueTooLargeError."""
    limit = js.nc.max_payload
    fits, too_big = 0, limit
    while too_big - fits > 1:  # the largest last message add() accepts
        size = (fits + too_big) // 2
        try:
            AtomicBatch(js, commit_with="eob").add(f"{stream}.last", b"x" * size)
            fits = size
        except jetstream.ValueTooLargeError:
            too_big = size
    batch = AtomicBatch(js, stream=stream, commit_with="eob", deadline=5)
    batch.add(f"{stream}.first", b"v")
    batch.add(f"{stream}.last", b"x" * fits)
    with pytest.raises(jetstream.ValueTooLargeError):
        await batch.commit()
    assert js.nc.is_connected, "nothing too large was sent"
    assert await _stored(js, stream) == []


@pytest.mark.parametrize(
    "options",
    [
        {"max_messages": 0},
        {"max_messages": "10"},
        {"ack_every": 0},
        {"ack_every": 2.5},
        {"commit_with": "first"},
        {"seal": "not callable"},
        {"seal_overhead": -1},
        {"seal_overhead": "28"},
    ],
)
async def test_bad_batch_options_are_typed_errors(
    js: JetStream, options: dict[str, object]
) -> None:
    """A str where an int goes raised a raw TypeError from a comparison; the rest raised a
    plain ValueError (a ClientValidationError is one, so ``except ValueError`` still works)."""
    with pytest.raises(jetstream.ClientValidationError):
        AtomicBatch(js, **options)  # type: ignore[arg-type]
