"""Publishing raw protocol frames, as any client may: bytes that nats-py (and our own
publishing path) would never send, such as subjects that are not UTF-8."""

from __future__ import annotations

import asyncio
import json


async def raw_publish(
    url: str, frames: list[tuple[str | bytes, bytes, bytes]], *, stored: bool = True
) -> None:
    """Publish ``(subject, header block, payload)`` as raw ``HPUB`` frames (``PUB`` when the
    block is empty), and return once the stream stored them all: the last frame asks for the
    stream's ack, which comes after every earlier message was stored (a PONG only says the
    server read them). ``stored=False``: subjects no stream takes; return at the PONG."""
    host, port = url.removeprefix("nats://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        await reader.readline()  # INFO
        connect = {"verbose": False, "pedantic": False, "headers": True, "protocol": 1}
        writer.write(b"CONNECT " + json.dumps(connect).encode() + b"\r\n")
        writer.write(b"SUB raw.ack 1\r\n")
        for i, (subject, block, payload) in enumerate(frames):
            name = subject.encode() if isinstance(subject, str) else subject
            reply = b" raw.ack" if stored and i == len(frames) - 1 else b""
            if block:
                total = len(block) + len(payload)
                writer.write(b"HPUB %s%s %d %d\r\n" % (name, reply, len(block), total))
            else:
                writer.write(b"PUB %s%s %d\r\n" % (name, reply, len(payload)))
            writer.write(block + payload + b"\r\n")
        if not stored:
            writer.write(b"PING\r\n")
            while not (line := await reader.readline()).startswith(b"PONG"):
                assert line and not line.startswith(b"-ERR"), line
            return
        await writer.drain()
        while not (line := await reader.readline()).startswith(b"MSG raw.ack"):
            assert line and not line.startswith(b"-ERR"), line
        ack = await reader.readline()
        assert b'"seq"' in ack and b"error" not in ack, ack
    finally:
        writer.close()
        await writer.wait_closed()
