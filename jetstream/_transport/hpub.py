"""Writing many messages at once: pre-encoded HPUB frames handed to nats-py in one piece.

nats-py's ``publish`` costs about 10 µs per message in Python (header encoding, checks, a
flush wake-up each time), which is most of an atomic batch's client time. The middle messages
of a batch need no reply, so they are encoded here and queued as one write. This uses nats-py's
``_send_command`` (the call ``publish`` itself ends in); when a nats-py version lacks it we fall
back to ``publish`` per message, and a test checks the fast path is live.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeAlias

from nats.aio.client import Client

from .nats_errors import nats_errors

__all__ = [
    "encode_hpub",
    "fast_path_available",
    "header_lines",
    "hpub_frame",
    "publish_encoded",
    "publish_frames",
]

Message: TypeAlias = tuple[str, dict[str, str], bytes]
"""``(subject, headers, payload)`` of a message published without a reply."""


def header_lines(headers: dict[str, str]) -> bytes:
    """``Name: value\\r\\n`` lines of ``headers`` (UTF-8), as an HPUB header block holds them.

    Headers must already be valid (see :func:`jetstream.headers.validate_headers`).
    """
    return "".join([f"{k}: {v}\r\n" for k, v in headers.items()]).encode()


def hpub_frame(subject: str, lines: bytes, payload: bytes) -> bytes:
    """The ``HPUB`` protocol frame of one message without a reply subject, its header lines
    already encoded (:func:`header_lines`, plus any the caller appends)."""
    block = len(lines) + _BLOCK_FRAMING
    return b"HPUB %s %d %d\r\nNATS/1.0\r\n%s\r\n%s\r\n" % (
        subject.encode(),
        block,
        block + len(payload),
        lines,
        payload,
    )


_BLOCK_FRAMING = len(b"NATS/1.0\r\n\r\n")


def encode_hpub(subject: str, headers: dict[str, str], payload: bytes) -> bytes:
    """The ``HPUB`` protocol frame of one message without a reply subject.

    Headers must already be valid (see :func:`jetstream.headers.validate_headers`).
    """
    return hpub_frame(subject, header_lines(headers), payload)


def fast_path_available(nc: Client) -> bool:
    """Whether this nats-py client accepts pre-encoded frames."""
    return callable(getattr(nc, "_send_command", None)) and hasattr(nc, "_flush_queue")


async def publish_frames(nc: Client, messages: list[Message]) -> None:
    """Publish ``(subject, headers, payload)`` messages, in order, without replies.

    Raises:
        ConnectionClosedError: the connection is closed.
        DisconnectedError: reconnecting and the pending buffer is full.
    """
    if messages:
        frames = (encode_hpub(s, h, p) for s, h, p in messages)
        await publish_encoded(nc, frames, lambda: messages, messages[0][0])


async def publish_encoded(
    nc: Client,
    frames: Iterable[bytes],
    messages: Callable[[], Iterable[Message]],
    subject: str,
) -> None:
    """Publish pre-encoded HPUB ``frames`` (:func:`hpub_frame`) in order, without replies;
    ``messages()`` gives the same messages as ``(subject, headers, payload)``, built only when
    the frames cannot be used. ``subject`` (the first one's) names them in errors.

    Only a connected client takes pre-encoded frames: otherwise each message goes through
    nats-py's ``publish``, whose checks give the documented errors (closed, draining, the
    reconnect buffer full) instead of frames queued into a client that will never send them.

    Raises:
        ConnectionClosedError: the connection is closed.
        DisconnectedError: reconnecting and the pending buffer is full.
    """
    with nats_errors(f"publishing messages to {subject}"):
        if not fast_path_available(nc) or not nc.is_connected:
            for message_subject, headers, payload in messages():
                await nc.publish(message_subject, payload, headers=headers)
            return
        await nc._send_command(b"".join(frames))
        flush_queue = nc._flush_queue
        if flush_queue is not None and flush_queue.empty():
            await nc._flush_pending()
