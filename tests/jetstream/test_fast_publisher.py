"""jetstream.FastPublisher (ADR-50 fast ingest) on a real server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

import jetstream
from jetstream import FastPublisher, JetStream, StreamConfig


@pytest.fixture
async def stream(js: JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    name = unique_name("FI")
    await js.add_stream(
        StreamConfig(name=name, subjects=[f"{name}.>"], allow_batched=True, allow_msg_ttl=True)
    )
    yield name
    await js.delete_stream(name)


async def _count(js: JetStream, stream: str) -> int:
    return (await js.stream_info(stream)).state.messages


@pytest.mark.parametrize("flow", [1, 7, 100])
async def test_commit_by_last_message_stores_everything(
    js: JetStream, stream: str, flow: int
) -> None:
    batch = FastPublisher(js, flow=flow)
    for i in range(299):
        await batch.add(f"{stream}.x", str(i).encode())
    ack = await batch.commit(f"{stream}.x", b"299")
    assert (ack.count, ack.stream) == (300, stream) and batch.acked >= 299 - 2 * flow
    assert await _count(js, stream) == 300
    assert (await js.get_message(stream, ack.seq, direct=None)).data == b"299"


async def test_leaving_the_block_commits_by_end_of_batch(js: JetStream, stream: str) -> None:
    async with FastPublisher(js) as batch:
        for _ in range(10):
            await batch.add(f"{stream}.y", b"v")
    assert batch.sent == 10 and await _count(js, stream) == 10
    with pytest.raises(jetstream.BatchClosedError):
        await batch.add(f"{stream}.y", b"late")


async def test_single_message_commit(js: JetStream, stream: str) -> None:
    ack = await FastPublisher(js).commit(f"{stream}.one", b"only")
    assert ack.count == 1 and await _count(js, stream) == 1


async def test_concurrent_publishers_are_ramped_by_the_server(js: JetStream, stream: str) -> None:
    async def publish(tag: int) -> int:
        batch = FastPublisher(js)
        for _ in range(499):
            await batch.add(f"{stream}.p{tag}", b"x" * 1000)
        return (await batch.commit(f"{stream}.p{tag}", b"end")).count

    counts = await asyncio.gather(*(publish(i) for i in range(4)))
    assert counts == [500] * 4 and await _count(js, stream) == 2000


async def test_a_refused_message_fails_the_batch_with_the_last_persisted_sequence(
    js: JetStream, stream: str
) -> None:
    batch = FastPublisher(js, flow=2)
    for _ in range(3):
        await batch.add(f"{stream}.z", b"ok")
    await batch.add(f"{stream}.z", b"bad", {"Nats-Expected-Last-Subject-Sequence": "999"})
    with pytest.raises(jetstream.FastBatchError) as failed:
        await batch.commit()
    assert failed.value.last_persisted == 3 and "refused" in str(failed.value)
    assert await _count(js, stream) == 3


async def test_gap_ok_tolerates_and_reports_refused_messages(js: JetStream, stream: str) -> None:
    batch = FastPublisher(js, gap="ok", flow=2)
    await batch.add(f"{stream}.g", b"1")
    await batch.add(f"{stream}.g", b"2", {"Nats-Expected-Last-Subject-Sequence": "999"})
    ack = await batch.commit(f"{stream}.g", b"3")
    assert ack.count == 3 and len(batch.problems) == 1
    assert await _count(js, stream) == 2


async def test_streams_without_fast_ingest_and_missing_streams_are_typed_errors(
    js: JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("NOFI")
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    with pytest.raises(jetstream.BatchPublishDisabledError) as disabled:
        await FastPublisher(js).add(f"{name}.a", b"x")
    assert disabled.value.err_code == 10205
    with pytest.raises(jetstream.NoRespondersError):
        await FastPublisher(js, timeout=2).add("no.stream.at.all", b"x")
    await js.delete_stream(name)


async def test_an_unanswered_batch_times_out(stream: str) -> None:
    async with jetstream.EmbeddedServer() as server, await jetstream.connect(server.url) as js:
        await js.add_stream(StreamConfig(name="T", subjects=["t.>"], allow_batched=True))
        batch = FastPublisher(js, timeout=1.0, flow=1, max_outstanding=1)
        await batch.add("t.a", b"1")
        server.pause()
        try:
            with pytest.raises(jetstream.RequestTimeoutError):
                for _ in range(10):
                    await batch.add("t.a", b"x")
        finally:
            server.resume()


def test_bad_options_are_refused(js: JetStream) -> None:
    for options in ({"flow": 0}, {"flow": 70000}, {"max_outstanding": 0}, {"gap": "maybe"}):
        with pytest.raises(jetstream.ClientValidationError):
            FastPublisher(js, **options)  # type: ignore[arg-type]
