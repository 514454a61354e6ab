"""The JetStream context against a real server: API calls, publish acks, direct get, errors."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable

import pytest

import jetstream
from jetstream import JetStream, StreamConfig
from jetstream._consume.scan import find_by_msg_id, scan_stream
from jetstream._protocol.models import ApiStats


async def test_account_info_reports_the_api_level(js: JetStream) -> None:
    info = await js.account_info()
    assert info.api.level >= 4  # nats-server 2.14+: TTL, atomic and fast ingest
    for feature in jetstream.Feature:
        assert await js.supports(feature)
        await js.require(feature)


async def test_require_names_the_missing_feature(js: JetStream) -> None:
    level = await js.api_level()
    js._account_info = jetstream.AccountInfo(api=ApiStats(level=1))  # an old server
    with pytest.raises(jetstream.UnsupportedServerFeatureError, match="atomic batch publish"):
        await js.require(jetstream.Feature.ATOMIC_BATCH)
    assert level >= 2


async def test_stream_lifecycle(js: JetStream, unique_name: Callable[[str], str]) -> None:
    name = unique_name("S")
    config = StreamConfig(name=name, subjects=[f"{name}.>"], allow_direct=True, allow_msg_ttl=True)
    info = await js.add_stream(config)
    assert info.config.allow_msg_ttl and info.config.allow_direct
    assert (await js.add_stream(config)).config.name == name, "identical create is idempotent"
    with pytest.raises(jetstream.StreamExistsError):
        await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.other"]))

    info.config.description = "changed"
    assert (await js.update_stream(info.config)).config.description == "changed"
    assert name in [n async for n in js.stream_names()]

    for i in range(3):
        await js.publish(f"{name}.a", str(i).encode())
    await js.publish(f"{name}.b", b"b")
    assert (await js.get_last_message(name, f"{name}.a")).data == b"2"
    first = await js.get_message(name, 1)
    assert (first.subject, first.data) == (f"{name}.a", b"0")

    await js.delete_message(name, 1)
    with pytest.raises(jetstream.MessageNotFoundError):
        await js.get_message(name, 1)
    assert await js.purge_stream(name, subject=f"{name}.a", keep=1) == 1
    assert await js.purge_stream(name) == 2
    await js.delete_stream(name)
    with pytest.raises(jetstream.StreamNotFoundError):
        await js.stream_info(name)
    with pytest.raises(jetstream.StreamNotFoundError):
        await js.delete_stream(name)


async def test_server_errors_map_to_typed_exceptions(
    js: JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("E")
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"], max_msg_size=100))
    with pytest.raises(jetstream.MessageTTLDisabledError) as disabled:
        await js.publish(f"{name}.x", b"v", headers={"Nats-TTL": "5"})
    assert disabled.value.err_code == 10166
    with pytest.raises(jetstream.MessageTTLInvalidError):
        await js.publish(f"{name}.x", b"v", headers={"Nats-TTL": "0"})
    with pytest.raises(jetstream.MessageTooLargeError):
        await js.publish(f"{name}.x", b"v" * 101)
    await js.publish(f"{name}.x", b"v")
    with pytest.raises(jetstream.WrongLastSequenceError) as wrong:
        await js.publish(f"{name}.x", b"v", headers={"Nats-Expected-Last-Subject-Sequence": "7"})
    assert wrong.value.last_sequence == 1
    with pytest.raises(jetstream.InvalidStreamConfigError):
        await js.add_stream(
            StreamConfig(
                name=unique_name("E"), subjects=["bad.>"], subject_delete_marker_ttl="500ms"
            )
        )
    await js.delete_stream(name)


async def test_no_stream_and_no_direct_get_are_no_responders(
    js: JetStream, unique_name: Callable[[str], str]
) -> None:
    with pytest.raises(jetstream.NoRespondersError):
        await js.publish("nobody.listens.here", b"x")
    name = unique_name("ND")
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    with pytest.raises(jetstream.NoRespondersError):
        await js.get_last_message(name, f"{name}.a")
    await js.delete_stream(name)


async def test_a_request_on_a_bad_subject_is_refused_before_anything_is_registered(
    js: JetStream,
) -> None:
    """Requests call nats-py's request step that registers the reply's future before
    publishing: a subject publish() refuses must be refused before, or the future stays."""
    await js.send("$JS.API.INFO", b"")  # the reply map exists
    waiting = len(js.nc._resp_map)
    for subject in ("", "a b", "a\tb", "a\r\nPUB x 1"):
        with pytest.raises(jetstream.ClientValidationError):
            await js.send(subject, b"")
    assert len(js.nc._resp_map) == waiting


async def test_scan_sees_the_last_message_of_every_subject(
    js: JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("SC")
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    for i in range(2500):  # more than direct get's 1024-subject limit and than one pull
        await js.nc.publish(f"{name}.k{i}", b"old")
    await js.publish(f"{name}.k0", b"new")
    seen = {m.subject: m.data async for m in scan_stream(js, name, [f"{name}.>"])}
    assert len(seen) == 2500
    assert seen[f"{name}.k0"] == b"new"
    await js.delete_stream(name)


async def test_next_by_subject_and_lookup_by_message_id(
    js: JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("ID")
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_direct=True))
    acks = {}
    for msg_id in ("a", "b", "c"):
        await js.publish(f"{name}.other", b"noise")
        acks[msg_id] = await js.publish(f"{name}.k", msg_id.encode(), msg_id=msg_id)
    for direct in (True, False):
        found = await js.get_next_message(name, f"{name}.k", 1, direct=direct)
        assert (found.seq, found.data) == (acks["a"].seq, b"a")
        after = await js.get_next_message(name, f"{name}.k", acks["a"].seq + 1, direct=direct)
        assert after.seq == acks["b"].seq
        with pytest.raises(jetstream.MessageNotFoundError):
            await js.get_next_message(name, f"{name}.k", acks["c"].seq + 1, direct=direct)
    for msg_id, ack in acks.items():  # in the subject's history, not only its last message
        stored = await find_by_msg_id(js, name, f"{name}.k", msg_id)
        assert stored is not None and stored.seq == ack.seq
    for seq, subject in ((0, f"{name}.k"), (True, f"{name}.k"), (1, "")):
        with pytest.raises(jetstream.ClientValidationError):
            await js.get_next_message(name, subject, seq)
    assert await find_by_msg_id(js, name, f"{name}.k", "never-sent") is None
    assert await find_by_msg_id(js, name, f"{name}.empty", "a") is None
    await js.delete_stream(name)


async def test_an_unreachable_server_is_a_connection_failed_error() -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(jetstream.ConnectionFailedError) as failed:
        await jetstream.connect(
            f"nats://user:s3cret@127.0.0.1:{port}",
            max_reconnect_attempts=1,
            reconnect_time_wait=0.05,
        )
    assert isinstance(failed.value, ConnectionError)
    assert not isinstance(failed.value, jetstream.AuthenticationError)
    assert f"nats://127.0.0.1:{port}" in str(failed.value) and "s3cret" not in str(failed.value)


AT_LOOP_SHUTDOWN = """
import asyncio, sys, time
import jetstream

async def cleanup_at_shutdown(js):
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:  # asyncio.run cancels every task left: the client's too
        await asyncio.sleep(0)
        started = time.monotonic()
        try:
            await js.stream_info("NONE")
        except jetstream.JetStreamError as exc:
            print(type(exc).__name__, round(time.monotonic() - started), flush=True)
        raise

async def main():
    js = await jetstream.connect(sys.argv[1], timeout=5.0)
    asyncio.create_task(cleanup_at_shutdown(js))
    await asyncio.sleep(0)  # returns with the connection open

asyncio.run(main())
"""


def test_a_request_once_the_event_loop_shuts_down_fails_at_once(
    nats_server: jetstream.EmbeddedServer,
) -> None:
    """The loop cancelled the client's reading task: no reply can come, so a request (a
    cleanup in a ``finally``) fails at once with ConnectionClosedError, not after its 5 s."""
    ended = subprocess.run(
        [sys.executable, "-c", AT_LOOP_SHUTDOWN, nats_server.url],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert ended.returncode == 0, ended.stderr.decode()
    assert ended.stdout.decode() == "ConnectionClosedError 0\n", ended.stderr.decode()


async def test_the_server_counts_the_messages_on_a_subject(
    js: JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("CT")
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_direct=True))
    for i in range(3000):  # beyond one batched direct get
        await js.nc.publish(f"{name}.p{i % 3}.k", b"x")
    await js.publish(f"{name}.p9.k", b"x")
    assert await js.count_messages(name, f"{name}.p1.k") == 1000
    assert await js.count_messages(name, f"{name}.>") == 3001
    assert await js.count_messages(name, f"{name}.*.k", from_seq=2001) == 1001
    assert await js.count_messages(name, f"{name}.nothing") == 0
    for seq, subject in ((0, f"{name}.>"), (True, f"{name}.>"), (1, "")):
        with pytest.raises(jetstream.ClientValidationError):
            await js.count_messages(name, subject, from_seq=seq)
    await js.delete_stream(name)
    name = unique_name("CN")
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    with pytest.raises(jetstream.NoRespondersError):  # no direct get: nobody counts
        await js.count_messages(name, f"{name}.>")
    await js.delete_stream(name)


async def test_a_request_with_a_bad_subject_or_payload_is_refused_before_sending(
    js: JetStream,
) -> None:
    """``JetStream.request`` is public: what it cannot send is a typed error, not nats-py's."""
    with pytest.raises(jetstream.WrongTypeError, match="payload"):
        await js.request("$JS.API.INFO", "text", jetstream.AccountInfo)  # type: ignore[arg-type]
    with pytest.raises(jetstream.ClientValidationError, match="subject"):
        await js.request("a b", b"", jetstream.AccountInfo)
    info = await js.request("$JS.API.INFO", b"", jetstream.AccountInfo)
    assert info.api.total > 0
