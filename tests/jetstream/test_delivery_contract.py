"""The contract ``jetstream._transport.delivery`` relies on in nats-py, and the header parser that
replaces nats-py's on routed deliveries: these fail when a nats-py release changes either, so
the direct delivery path never silently diverges from nats-py's."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from nats.aio.client import Client
from nats.aio.subscription import Subscription
from nats.protocol.parser import Parser

from jetstream._protocol.message import parse_headers
from jetstream._transport.delivery import DeliveryClient, discard, route_of
from jetstream._transport.frames import FrameParser

FRAME_HEADERS = b"NATS/1.0\r\nKV-Operation: DEL\r\nNats-TTL: 5s\r\n\r\n"
REPLY = b"$JS.ACK.KV_b.c.1.7.7.1700000000000000000.0"


class FakeSub:
    def __init__(self, sid: int) -> None:
        self._id = sid


def frame(sid: int, headers: bytes, payload: bytes) -> bytes:
    size = len(headers) + len(payload)
    return b"HMSG _INBOX.x %d %s %d %d\r\n%s%s\r\n" % (
        sid,
        REPLY,
        len(headers),
        size,
        headers,
        payload,
    )


def test_process_msg_keeps_the_signature_unrouted_frames_are_passed_to() -> None:
    params = list(inspect.signature(Client._process_msg).parameters)
    assert params == ["self", "sid", "subject", "reply", "data", "headers"]
    assert inspect.iscoroutinefunction(Client._process_msg)


def test_nats_py_reads_through_the_parser_in_ps_and_resets_it_on_reconnect() -> None:
    client = DeliveryClient()
    assert isinstance(client._ps, FrameParser)
    assert "await self._ps.parse(b)" in inspect.getsource(Client._read_loop)
    for method in (Client._process_op_err, Client._process_connect_init):
        assert "self._ps.reset()" in inspect.getsource(method)
    assert list(inspect.signature(Parser.parse).parameters) == ["self", "data"]
    assert inspect.iscoroutinefunction(Parser.parse)


def test_nats_py_answers_pings_with_the_oldest_future_in_pongs() -> None:
    """DeliveryClient._process_pong retires an abandoned flush's future the way nats-py
    retires an answered one."""
    source = inspect.getsource(Client._process_pong)
    assert "self._pongs.pop(0)" in source and "future.set_result(True)" in source
    assert "self._pongs_received += 1" in source and "self._pings_outstanding = 0" in source
    assert "self._pongs.append(future)" in inspect.getsource(Client._send_ping)


async def test_nats_py_parser_hands_routed_frames_to_the_handler_raw() -> None:
    client = DeliveryClient()
    got: list[tuple[bytes, bytes, bytes | None, bytes]] = []
    client.route(FakeSub(7), lambda *frame: got.append(frame))
    await client._ps.parse(frame(7, FRAME_HEADERS, b"hello"))
    assert got == [(b"_INBOX.x", REPLY, FRAME_HEADERS, b"hello")]
    assert (client.stats["in_msgs"], client.stats["in_bytes"]) == (1, 5)


async def test_unrouted_and_unrouted_again_frames_take_nats_py_path() -> None:
    client = DeliveryClient()
    got: list[Any] = []
    sub = FakeSub(7)
    client.route(sub, lambda *frame: got.append(frame))
    client.unroute(sub)
    await client._ps.parse(frame(7, FRAME_HEADERS, b"x"))  # no such subscription: dropped
    await client._ps.parse(frame(8, FRAME_HEADERS, b"y"))
    assert got == []
    assert client.stats["in_msgs"] == 2  # nats-py counted them


async def test_a_failing_handler_goes_to_the_error_callback_not_the_reader() -> None:
    client = DeliveryClient()
    errors: list[Exception] = []

    async def error_cb(exc: Exception) -> None:
        errors.append(exc)

    client._error_cb = error_cb

    def broken(*frame: object) -> None:
        raise RuntimeError("bug")

    client.route(FakeSub(3), broken)
    await client._ps.parse(frame(3, FRAME_HEADERS, b"x") * 2)
    assert [str(e) for e in errors] == ["bug", "bug"]


async def test_a_pong_for_a_flush_that_gave_up_leaves_the_reader_running() -> None:
    assert "self._pongs.pop(0)" in inspect.getsource(Client._process_pong)
    client = DeliveryClient()
    loop = asyncio.get_running_loop()
    gave_up, waiting = loop.create_future(), loop.create_future()
    gave_up.cancel()  # a flush cut short by its caller's timeout
    client._pongs = [gave_up, waiting]
    await client._process_pong()  # nats-py's own raises InvalidStateError here
    assert not waiting.done(), "a PONG answers the oldest flush, in order"
    await client._process_pong()
    assert waiting.result() is True and client._pongs == []


async def test_a_discarded_subscription_is_gone_with_its_task() -> None:
    async def on_msg(msg: object) -> None:
        pass

    client = DeliveryClient()
    sub = Subscription(client, id=4, subject="_INBOX.x", cb=on_msg)  # type: ignore[arg-type]
    sub._start(None)
    client._subs[4] = sub
    task = sub._wait_for_msgs_task
    await discard(sub)
    await discard(sub)  # again: nothing more
    assert 4 not in client._subs and task is not None and task.done()


def test_only_delivery_clients_route() -> None:
    assert route_of(Client()) is None
    client = DeliveryClient()
    assert route_of(client) is client


BLOCKS = [
    FRAME_HEADERS,
    b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 0\r\nNats-Last-Stream: 0\r\n\r\n",
    b"NATS/1.0 404 No Messages\r\n\r\n",
    b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 3\r\nNats-Pending-Bytes: 0\r\n\r\n",
    b"NATS/1.0 409 Message Size Exceeds MaxBytes\r\n\r\n",
    b"NATS/1.0 503\r\n\r\n",
    b"NATS/1.0\r\nA: 1\r\nA: 2\r\n\r\n",  # a repeated name keeps its last value
    b"NATS/1.0\r\nName:NoSpace\r\nTabbed:\tvalue \r\n\r\n",
    b"NATS/1.0\r\nBad Name: skipped\r\nGood: kept\r\n\r\n",
    b"NATS/1.0\r\nValue: caf\xc3\xa9 \xff\r\n\r\n",  # bad UTF-8 in a value: replaced
    b"NATS/1.0\r\nno colon line\r\nX: y\r\n\r\n",
    b"NATS/1.0\r\nNats-Batch-Id: abc\r\nNats-Batch-Sequence: 12\r\nKV-Operation: PURGE\r\n\r\n",
]


@pytest.mark.parametrize("block", BLOCKS, ids=range(len(BLOCKS)))
async def test_header_parser_agrees_with_nats_py(block: bytes) -> None:
    theirs = await Client()._process_headers(block) or {}
    assert parse_headers(block) == theirs


# Bytes other clients may put in header lines: ASCII and Unicode whitespace (NEL, EM SPACE,
# NBSP, the \x1c-\x1f separators), bad UTF-8, colons, lone CR/LF.
_PIECES = [b"A", b"b", b"-", b"0", b" ", b"\t", b":", b"\r", b"\n", b"\x0b", b"\x0c", b"\x1c"]
_PIECES += [b"\x1f", b"\x00", b"\x85", b"\xff", b"\xc2\x85", b"\xc2\xa0", b"\xe2\x80\x83"]
_LINES = st.lists(st.lists(st.sampled_from(_PIECES), max_size=8).map(b"".join), max_size=5)


@given(_LINES)
async def test_header_parser_agrees_with_nats_py_on_any_header_lines(lines: list[bytes]) -> None:
    """Whatever header lines another client wrote (status lines come from the server only)."""
    block = b"NATS/1.0\r\n" + b"\r\n".join(lines) + b"\r\n\r\n"
    theirs = await Client()._process_headers(block) or {}
    assert parse_headers(block) == theirs


def test_long_header_names_are_not_remembered() -> None:
    """Header names come from any client, up to 64 KiB each: remembering them (the parser
    keeps the short names it has validated) must not hold megabytes for the process' life."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(300):
            name = b"N%05d" % i + b"x" * 60_000
            assert parse_headers(b"NATS/1.0\r\n" + name + b": v\r\n\r\n") == {name.decode(): "v"}
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert retained < 1_000_000, f"{retained / 1e6:.1f} MB kept by the header parser"
