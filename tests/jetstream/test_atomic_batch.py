"""jetstream.AtomicBatch on a real server: framing, errors, and commits whose reply is lost."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable

import pytest

import jetstream
from jetstream import AtomicBatch, JetStream, StreamConfig
from jetstream._consume.scan import scan_stream
from tests.proxy import TcpProxy


@pytest.fixture
async def stream(js: JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    name = unique_name("AB")
    await js.add_stream(
        StreamConfig(name=name, subjects=[f"{name}.>"], allow_atomic=True, allow_direct=True)
    )
    yield name
    await js.delete_stream(name)


async def _stored(js: JetStream, stream: str) -> list[jetstream.StoredMessage]:
    return [m async for m in scan_stream(js, stream, [f"{stream}.>"], last_per_subject=False)]


async def test_commit_stores_everything_contiguously(js: JetStream, stream: str) -> None:
    async with AtomicBatch(js) as batch:
        for i in range(5):
            batch.add(f"{stream}.k{i}", f"v{i}".encode())
    ack = batch.ack
    assert ack is not None and ack.count == 5 and not ack.resolved and ack.stream == stream
    stored = await _stored(js, stream)
    assert [m.seq for m in stored] == ack.sequences
    assert [m.data for m in stored] == [f"v{i}".encode() for i in range(5)]
    assert stored[-1].headers[jetstream.headers.BATCH_COMMIT] == "1"
    assert all(m.headers[jetstream.headers.BATCH_ID] == ack.batch_id for m in stored)


@pytest.mark.parametrize("options", [{"commit_with": "eob"}, {"ack_every": 2}, {}])
async def test_commit_modes(js: JetStream, stream: str, options: dict[str, object]) -> None:
    batch = AtomicBatch(js, **options)  # type: ignore[arg-type]
    for i in range(7):
        batch.add(f"{stream}.k{i}", b"v")
    ack = await batch.commit()
    assert ack.count == 7 and len(await _stored(js, stream)) == 7


async def test_single_message_and_empty_batches(js: JetStream, stream: str) -> None:
    one = AtomicBatch(js)
    one.add(f"{stream}.only", b"v")
    assert (await one.commit()).count == 1
    empty = await AtomicBatch(js).commit()
    assert empty.count == 0 and empty.sequences == []


async def test_a_stream_without_atomic_fails_on_the_first_message(
    js: JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("NA")
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    batch = AtomicBatch(js)
    for i in range(3):
        batch.add(f"{name}.k{i}", b"v")
    with pytest.raises(jetstream.BatchPublishDisabledError):
        await batch.commit()
    assert (await js.stream_info(name)).state.messages == 0
    await js.delete_stream(name)


async def test_a_failed_condition_stores_nothing(js: JetStream, stream: str) -> None:
    await js.publish(f"{stream}.a", b"existing")
    batch = AtomicBatch(js)
    batch.add(f"{stream}.b", b"new")
    batch.add(f"{stream}.a", b"x", {jetstream.headers.EXPECTED_LAST_SUBJECT_SEQUENCE: "0"})
    with pytest.raises(jetstream.WrongLastSequenceError) as wrong:
        await batch.commit()
    assert wrong.value.last_sequence == 1
    assert len(await _stored(js, stream)) == 1


async def test_exception_abandons_and_closed_batches_refuse_use(js: JetStream, stream: str) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        async with AtomicBatch(js) as batch:
            batch.add(f"{stream}.a", b"v")
            raise RuntimeError("boom")
    with pytest.raises(jetstream.BatchClosedError):
        batch.add(f"{stream}.b", b"v")
    with pytest.raises(jetstream.BatchClosedError):
        await batch.commit()
    assert await _stored(js, stream) == []
    async with AtomicBatch(js) as done:
        done.add(f"{stream}.a", b"v")
    with pytest.raises(jetstream.BatchClosedError):
        done.add(f"{stream}.b", b"v")


async def test_bad_messages_are_refused_when_added(js: JetStream, stream: str) -> None:
    batch = AtomicBatch(js, max_messages=3)
    for i in range(3):
        batch.add(f"{stream}.k{i}", b"v")
    with pytest.raises(jetstream.BatchTooLargeError):
        batch.add(f"{stream}.k3", b"v")
    other = AtomicBatch(js)
    other.add(f"{stream}.a", b"v", {"Nats-Msg-Id": "same"})
    for subject, headers in [
        (f"{stream}.b", {"Nats-Msg-Id": "same"}),
        (f"{stream}.b", {"Nats-Batch-Id": "mine"}),
        (f"{stream}.b", {"Nats-Expected-Last-Msg-Id": "x"}),
        (f"{stream}.b", {"Nats-Expected-Last-Sequence": "1"}),
        (f"{stream}.b", {"Bad Name": "x"}),
        (f"{stream}.b", {"X": "line\r\nbreak"}),
    ]:
        with pytest.raises(jetstream.InvalidHeaderError):
            other.add(subject, b"v", headers)
    for subject in ["", "a b", "a.*", "a.>", "a..b"]:
        with pytest.raises(jetstream.ClientValidationError):
            other.add(subject, b"v")
    with pytest.raises(jetstream.WrongTypeError):
        other.add(f"{stream}.c", "text")  # type: ignore[arg-type]
    with pytest.raises(jetstream.ValueTooLargeError):
        other.add(f"{stream}.c", b"x" * (js.nc.max_payload + 1))
    assert len(other) == 1, "refused messages are not queued"


async def test_a_caller_msg_id_used_before_refuses_the_whole_batch(
    js: JetStream, stream: str
) -> None:
    await js.publish(f"{stream}.earlier", b"x", msg_id="order-17")
    batch = AtomicBatch(js, stream=stream)
    batch.add(f"{stream}.a", b"1")
    batch.add(f"{stream}.b", b"2", headers={"Nats-Msg-Id": "order-17"})
    with pytest.raises(jetstream.DuplicateMessageIdError):
        await batch.commit()
    assert [m.subject for m in await _stored(js, stream)] == [f"{stream}.earlier"]


# -- lost commit replies ----------------------------------------------------------------------


@pytest.fixture
async def proxy(nats_server: jetstream.EmbeddedServer) -> AsyncIterator[TcpProxy]:
    proxy = await TcpProxy(nats_server.port).start()
    yield proxy
    await proxy.close()


@pytest.fixture
async def proxied_js(proxy: TcpProxy) -> AsyncIterator[JetStream]:
    async with await jetstream.connect(
        proxy.url, timeout=0.5, reconnect_time_wait=0.1, max_reconnect_attempts=-1
    ) as context:
        yield context


def _heal_after(proxy: TcpProxy, delay: float) -> asyncio.Task[None]:
    async def heal() -> None:
        await asyncio.sleep(delay)
        proxy.drop_to_client = proxy.drop_to_server = False
        proxy.on_client_bytes = None

    return asyncio.create_task(heal())


async def test_commit_that_stored_but_lost_its_reply_returns_the_stored_sequences(
    proxied_js: JetStream, js: JetStream, proxy: TcpProxy, stream: str
) -> None:
    def lose_replies_after_commit(chunk: bytes) -> bool:
        if b"Nats-Batch-Commit" in chunk:
            proxy.drop_to_client = True  # the commit reaches the server, its reply does not
        return True

    proxy.on_client_bytes = lose_replies_after_commit
    healing = _heal_after(proxy, 1.5)
    batch = AtomicBatch(proxied_js, stream=stream, deadline=20)
    for i in range(10):
        batch.add(f"{stream}.k{i}", f"v{i}".encode())
    ack = await batch.commit()
    await healing
    assert ack.resolved and ack.batch_id == batch.batch_id, "found the first attempt's batch"
    stored = await _stored(js, stream)
    assert len(stored) == 10, "stored exactly once"
    assert [m.seq for m in stored] == ack.sequences
    assert [m.data for m in stored] == [f"v{i}".encode() for i in range(10)]


async def test_commit_lost_on_the_way_is_sent_again(
    proxied_js: JetStream, js: JetStream, proxy: TcpProxy, stream: str
) -> None:
    def lose_the_commit(chunk: bytes) -> bool:
        if b"Nats-Batch-Commit" in chunk:
            proxy.drop_to_server = True  # neither this chunk nor anything after arrives
        return not proxy.drop_to_server

    proxy.on_client_bytes = lose_the_commit
    healing = _heal_after(proxy, 1.5)
    batch = AtomicBatch(proxied_js, stream=stream, deadline=20)
    for i in range(10):
        batch.add(f"{stream}.k{i}", f"v{i}".encode())
    ack = await batch.commit()
    await healing
    assert ack.resolved and ack.batch_id != batch.batch_id, "committed by the resend"
    stored = await _stored(js, stream)
    assert [m.seq for m in stored] == ack.sequences and len(stored) == 10


async def test_unreachable_until_the_deadline_is_commit_unknown(
    proxied_js: JetStream, js: JetStream, proxy: TcpProxy, stream: str
) -> None:
    def lose_replies_after_commit(chunk: bytes) -> bool:
        if b"Nats-Batch-Commit" in chunk:
            proxy.drop_to_client = True
        return True

    proxy.on_client_bytes = lose_replies_after_commit
    batch = AtomicBatch(proxied_js, stream=stream, deadline=1.5)
    batch.add(f"{stream}.a", b"v")
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(jetstream.CommitUnknownError) as unknown:
        await batch.commit()
    assert loop.time() - started < 1.5 + 2 * 0.5 + 1, "gives up at the deadline"
    assert unknown.value.batch_id == batch.batch_id and len(unknown.value.msg_ids) == 1
    proxy.drop_to_client = False
    stored = await _stored(js, stream)
    assert [m.headers["Nats-Msg-Id"] for m in stored] == unknown.value.msg_ids


async def test_no_responders_fails_at_once_when_no_stream_takes_the_subject(
    js: JetStream, unique_name: Callable[[str], str]
) -> None:
    """A 503 is waited out only while a stream takes the subject (an election); with none, the
    batch fails at once, as a single publish does, not after its deadline."""
    missing = AtomicBatch(js, deadline=30)
    missing.add(f"{unique_name('NONE')}.a", b"v")
    async with asyncio.timeout(10):
        with pytest.raises(jetstream.NoRespondersError):
            await missing.commit()


async def test_a_batch_committing_on_a_subject_no_stream_takes_fails_at_once(
    js: jetstream.JetStream,
) -> None:
    """The 503 fix looks only at the first message's subject: a batch whose commit message
    goes to a subject no stream takes waits out the whole deadline instead."""
    name = f"ABR{os.getpid()}"
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_atomic=True))
    try:
        batch = AtomicBatch(js, deadline=10.0)
        batch.add(f"{name}.a", b"1")
        batch.add(f"NOSTREAM{os.getpid()}.b", b"2")  # a typo'd subject, the commit
        started = time.monotonic()
        with pytest.raises(jetstream.JetStreamError):
            await batch.commit()
        assert time.monotonic() - started < 5, "waited out the commit deadline"
    finally:
        await js.delete_stream(name)


async def test_a_plain_atomic_batch_keeps_every_messages_headers(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("S")
    await js.add_stream(
        jetstream.StreamConfig(name=name, subjects=[f"{name}.>"], allow_atomic=True)
    )
    try:
        sent = [
            {},
            {"X-A": "1"},
            {"X-A": "1"},
            {"X-A": "café"},  # UTF-8: sized and framed by bytes
            {},
            {"X-A": "1", "X-B": "2"},
            {"X-A": "1", "X-B": "2"},
        ]
        async with jetstream.AtomicBatch(js, stream=name) as batch:
            for i, headers in enumerate(sent):
                batch.add(f"{name}.m{i}", f"data {i}".encode(), headers)
        assert batch.ack is not None and batch.ack.count == len(sent)
        for i, (headers, seq) in enumerate(zip(sent, batch.ack.sequences, strict=True)):
            raw = await js.get_message(name, seq, direct=False)  # nats-py mangles UTF-8 values
            own = {k: v for k, v in raw.headers.items() if not k.startswith("Nats-")}
            assert (raw.subject, raw.data, own) == (f"{name}.m{i}", f"data {i}".encode(), headers)
    finally:
        await js.delete_stream(name)
