"""A delivered message's header block is parsed when its headers are first read, as the
parser reads it; ``lacks_headers`` tells from the raw block that a header is certainly absent."""

from __future__ import annotations

from typing import Any, cast

from jetstream import PullMessage
from jetstream._consume.pull_message import framed_message, lacks_headers
from jetstream._protocol.message import parse_headers

REPLY = b"$JS.ACK.S.C.1.5.5.1700000000000000000.0"
BLOCK = b"NATS/1.0\r\nNats-Batch-Id: b1\r\nKV-Operation:  DEL \r\n\r\n"
NC = cast(Any, None)


def test_headers_of_a_framed_message_are_those_of_its_block() -> None:
    message = framed_message(b"$KV.b.k", REPLY, BLOCK, b"", 0, NC)
    assert message.headers == parse_headers(BLOCK) == {"Nats-Batch-Id": "b1", "KV-Operation": "DEL"}
    assert message.headers is message.headers  # parsed once


def test_a_message_without_a_block_has_no_headers() -> None:
    message = framed_message(b"$KV.b.k", REPLY, None, b"v", 0, NC)
    assert message.headers == {}
    assert lacks_headers(message, (b"KV-Operation",))


def test_lacks_headers_before_and_after_parsing() -> None:
    message = framed_message(b"$KV.b.k", REPLY, BLOCK, b"", 0, NC)
    assert not lacks_headers(message, (b"Nats-TTL", b"KV-Operation"))
    assert lacks_headers(message, (b"Nats-TTL", b"kv-operation"))  # names are case-sensitive
    message.headers  # noqa: B018 - parsed now
    assert not lacks_headers(message, (b"KV-Operation",))
    assert lacks_headers(message, (b"Nats-TTL",))


def test_a_message_built_with_headers_keeps_them() -> None:
    message = PullMessage("s", "r", b"", {"A": "1"}, 0, NC)
    assert message.headers == {"A": "1"}
    assert not lacks_headers(message, (b"A",))
