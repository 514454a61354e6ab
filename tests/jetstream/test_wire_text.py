"""The one decoding policy for bytes other clients wrote: subjects strict, header values
replaced but a subject-valued header kept exact, JSON that is not UTF-8 a decode error, and the
protocol reader never handing nats-py a subject it cannot decode."""

from __future__ import annotations

import msgspec
import pytest

import jetstream
from jetstream._consume.pull_message import framed_message, skipped
from jetstream._protocol.message import StoredMessage, parse_headers
from jetstream._protocol.text import decode_json, shown_bytes, subject_text, utf8_or_none
from jetstream._transport.delivery import DeliveryClient

REPLY = b"$JS.ACK.KV_b.c.1.7.3.1700000000000000000.0"


def test_subjects_decode_strictly() -> None:
    assert subject_text(b"$KV.b.caf\xc3\xa9") == "$KV.b.café"
    assert subject_text(b"$KV.b.k\xff") is None
    assert shown_bytes(b"$KV.b.k\xff") == "b'$KV.b.k\\xff'"


def test_header_values_are_replaced_but_the_stored_subject_keeps_its_bytes() -> None:
    block = b"NATS/1.0\r\nNats-Subject: $KV.b.k\xff\r\nX-Note: caf\xe9\r\nNats-Sequence: 2\r\n\r\n"
    headers = parse_headers(block)
    assert headers["X-Note"] == "caf\ufffd"
    assert utf8_or_none(headers["Nats-Subject"]) is None
    assert shown_bytes(headers["Nats-Subject"]) == "b'$KV.b.k\\xff'"
    headers["Nats-Time-Stamp"] = "2026-11-27T08:00:00Z"
    headers["Nats-Stream"] = "KV_b"
    with pytest.raises(jetstream.UndecodableMessageError) as caught:
        StoredMessage.from_direct_get(headers, b"v")
    assert (caught.value.stream, caught.value.seq) == ("KV_b", 2)


def test_a_valid_block_parses_as_before() -> None:
    block = b"NATS/1.0\r\nNats-Subject: $KV.b.caf\xc3\xa9\r\n\r\n"
    assert parse_headers(block) == {"Nats-Subject": "$KV.b.café"}
    assert utf8_or_none("$KV.b.café") == "$KV.b.café"


def test_a_frame_with_a_subject_that_is_not_utf8_becomes_an_undecodable_message() -> None:
    client = DeliveryClient()
    message = framed_message(b"$KV.b.k\xff", REPLY, None, b"v", 0, client)
    assert message.undecodable
    assert message.metadata.stream_seq == 7
    warning = skipped(message, "KV_b")
    assert (warning.stream, warning.seq) == ("KV_b", 7)
    assert "stream sequence 7 of KV_b" in str(warning) and "\\xff" in str(warning)
    assert not framed_message(b"$KV.b.k", REPLY, None, b"v", 0, client).undecodable


async def test_unrouted_frames_nats_py_cannot_decode_are_dropped_and_reported() -> None:
    client = DeliveryClient()
    reported: list[Exception] = []
    delivered: list[bytes] = []

    async def error_cb(error: Exception) -> None:
        reported.append(error)

    async def process_msg(sid: int, subject: bytes, *rest: object) -> None:
        delivered.append(subject)

    client._error_cb = error_cb  # type: ignore[method-assign]
    client._process_msg = process_msg  # type: ignore[method-assign]
    await client._ps.parse(b"MSG a.\xff 1 2\r\nhi\r\nMSG a.ok 1 2\r\nhi\r\n")
    assert delivered == [b"a.ok"]
    assert [type(e) for e in reported] == [jetstream.UndecodableMessageError]


def test_json_that_is_not_utf8_is_a_decode_error() -> None:
    decode = msgspec.json.Decoder(dict[str, str]).decode
    assert decode_json(decode, b'{"a":"caf\xc3\xa9"}') == {"a": "café"}
    for bad in (b'{"a":"\xff"}', b'{"a":"\\ud800"}'):
        with pytest.raises(msgspec.DecodeError):
            decode_json(decode, bad)
