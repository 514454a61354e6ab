"""``FrameParser``, the protocol reader of our nats-py client: for any byte stream, split
anywhere, it makes the same calls nats-py's own ``Parser`` makes (frames of routed
subscriptions go to their handler instead), and refuses what nats-py refuses."""

from __future__ import annotations

import random
from typing import Any

import pytest
from nats.errors import ProtocolError
from nats.protocol.parser import Parser

from jetstream._transport.frames import FrameParser

HEADERS = b"NATS/1.0\r\nNats-Batch-Id: x\r\nKV-Operation: DEL\r\n\r\n"
BIG = bytes(range(256)) * 1200  # 300 KiB, with CR, LF and "MSG " inside


def hmsg(subject: bytes, sid: int, reply: bytes, headers: bytes, payload: bytes) -> bytes:
    fields = b" ".join(f for f in (subject, b"%d" % sid, reply) if f)
    size = len(headers) + len(payload)
    return b"HMSG %s %d %d\r\n%s%s\r\n" % (fields, len(headers), size, headers, payload)


STREAM = b"".join(
    [
        b'INFO {"server_id":"s1","max_payload":1048576}\r\n',
        b"MSG a.b 1 5\r\nhello\r\n",
        b"MSG a.b 1 _INBOX.r 0\r\n\r\n",
        b"MSG\ta.c  1 \t_INBOX.r   3\r\nx\r\n\r\n",  # tabs and runs of spaces, CRLF in payload
        hmsg(b"$KV.b.k1", 2, b"", HEADERS, b"v1"),
        hmsg(b"$KV.b.k2", 2, b"$JS.ACK.KV_b.c.1.9.9.1700000000000000000.0", HEADERS, b""),
        b"PING\r\n",
        hmsg(b"$O.s.C.n", 2, b"$JS.ACK.x", b"NATS/1.0\r\n\r\n", BIG),
        b"+OK\r\n",
        b"PONG\r\n",
        b"MSG MSG 3 MSG 4\r\nMSG \r\n",
        b"-ERR 'Permissions Violation for Subscription to \"x\"'\r\n",
        hmsg(b"$JS.FC.x", 3, b"", b"NATS/1.0 100 FlowControl Request\r\n\r\n", b""),
    ]
)


class Recorder:
    """The client side of a parser: records every call it receives."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.stats = {"in_msgs": 0, "in_bytes": 0}

    async def _process_msg(self, *frame: Any) -> None:
        sid, subject, reply, payload, headers = frame
        self.calls.append(("msg", sid, subject, reply, headers, payload))

    async def _process_ping(self) -> None:
        self.calls.append(("ping",))

    async def _process_pong(self) -> None:
        self.calls.append(("pong",))

    async def _process_info(self, info: dict[str, Any]) -> None:
        self.calls.append(("info", info))

    async def _process_err(self, err: str) -> None:
        self.calls.append(("err", err))

    async def _error_cb(self, exc: Exception) -> None:
        self.calls.append(("error_cb", str(exc)))


async def feed(parser: Any, data: bytes, sizes: list[int]) -> None:
    pos = 0
    for size in sizes:
        await parser.parse(data[pos : pos + size])
        pos += size
    await parser.parse(data[pos:])


def splits(seed: int, total: int) -> list[int]:
    rng = random.Random(seed)
    limit = rng.choice([1, 3, 64, 4096, 40_000])
    sizes: list[int] = []
    while total > 0:
        sizes.append(rng.randint(0, limit))
        total -= sizes[-1]
    return sizes


async def nats_py_calls(data: bytes) -> list[tuple[Any, ...]]:
    client = Recorder()
    await Parser(client).parse(data)
    return client.calls


@pytest.mark.parametrize("seed", range(12))
async def test_same_calls_as_nats_py_however_the_stream_is_split(seed: int) -> None:
    expected = await nats_py_calls(STREAM)
    client = Recorder()
    await feed(FrameParser(client, {}), STREAM, splits(seed, len(STREAM)))  # type: ignore[arg-type]
    assert client.calls == expected


@pytest.mark.parametrize("seed", range(6))
async def test_routed_frames_go_to_their_handler_with_what_nats_py_would_pass(seed: int) -> None:
    client = Recorder()

    def routed(subject: bytes, reply: bytes, headers: bytes | None, payload: bytes) -> None:
        client.calls.append(("msg", 2, subject, reply, headers, payload))

    parser = FrameParser(client, {2: routed})  # type: ignore[arg-type]
    await feed(parser, STREAM, splits(seed, len(STREAM)))
    assert client.calls == await nats_py_calls(STREAM)
    sizes = [len(call[5]) for call in client.calls if call[:2] == ("msg", 2)]
    assert client.stats == {"in_msgs": 3, "in_bytes": sum(sizes)}


async def test_a_failing_handler_reaches_the_error_callback_and_reading_goes_on() -> None:
    client = Recorder()

    def broken(*frame: object) -> None:
        raise RuntimeError("bug")

    parser = FrameParser(client, {2: broken})  # type: ignore[arg-type]
    await parser.parse(hmsg(b"s", 2, b"", HEADERS, b"x") + b"PING\r\n")
    assert client.calls == [("error_cb", "bug"), ("ping",)]


@pytest.mark.parametrize(
    "line",
    [
        b"MSG a b 5\r\n",  # sid not a number
        b"MSG a 1 x\r\n",  # size not a number
        b"MSG a 1\r\n",  # no size
        b"MSG a\r\n",  # no sid either
        b"HMSG\r\n",
        b"MSG a 1 r s 5\r\n",  # a field too many
        b"HMSG a 1 5\r\n",  # no header size
        b"HMSG a 1 r 2 x\r\n",
        b"NOPE\r\n",  # unknown operation: nats-py's own verdict
    ],
)
async def test_malformed_lines_are_protocol_errors_as_in_nats_py(line: bytes) -> None:
    with pytest.raises(ProtocolError):
        await Parser(Recorder()).parse(line)
    with pytest.raises(ProtocolError):
        await FrameParser(Recorder(), {}).parse(line)  # type: ignore[arg-type]


async def test_reset_forgets_a_partial_frame() -> None:
    client = Recorder()
    parser = FrameParser(client, {})  # type: ignore[arg-type]
    await parser.parse(b"MSG a 1 10\r\nhal")
    parser.reset()  # nats-py reconnected: the rest of that frame never comes
    await parser.parse(b"MSG b 1 2\r\nok\r\n")
    assert client.calls == [("msg", 1, b"b", b"", None, b"ok")]


async def test_a_payload_larger_than_a_read_waits_whole_then_arrives_once() -> None:
    client = Recorder()
    parser = FrameParser(client, {})  # type: ignore[arg-type]
    frame = b"MSG big 1 %d\r\n%s\r\n" % (len(BIG), BIG)
    for start in range(0, len(frame) - 1, 32_768):
        await parser.parse(frame[start : start + 32_768])
    assert client.calls[-1][-1] == BIG and len(client.calls) == 1


class Bounded(Recorder):
    """Stops a reader that hands the same frames over again and again."""

    async def _process_msg(self, *frame: Any) -> None:
        await super()._process_msg(*frame)
        if len(self.calls) > 100:
            raise RuntimeError("the same frame again and again")


@pytest.mark.parametrize(
    "data",
    [
        b"MSG a 1 -15\r\n",  # a negative size moved the reader back to the line's start
        b"MSG a 1 2\r\nok\r\nMSG b 1 -30\r\n",  # ... or into an earlier frame, forever
        b"HMSG a 1 0 -18\r\n",
    ],
)
async def test_a_size_nats_py_would_not_match_is_a_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        await Parser(Recorder()).parse(data)
    with pytest.raises(ProtocolError):
        await FrameParser(Bounded(), {}).parse(data)  # type: ignore[arg-type]


@pytest.mark.parametrize("data", [b"HMSG a 1 9 5\r\nxxxxx\r\n", b"MSG a +1 2\r\nok\r\n"])
async def test_stricter_than_nats_py_where_it_would_misread(data: bytes) -> None:
    """nats-py takes these (a header larger than the message, a signed sid) and hands on
    garbage; the server never sends them."""
    with pytest.raises(ProtocolError):
        await FrameParser(Bounded(), {}).parse(data)  # type: ignore[arg-type]
