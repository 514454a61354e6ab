"""The protocol reader of a :class:`~jetstream._transport.delivery.DeliveryClient`: cuts
``MSG``/``HMSG`` frames out of what the socket returns, and hands frames of routed
subscriptions straight to their handlers.

nats-py's ``Parser`` matches two regular expressions per frame on a ``bytearray``, copies each
payload twice, deletes from the buffer's front twice and awaits a coroutine per frame: about
6 µs a frame, half of a watch's whole cost per event. This one finds the control line with
``bytes.find``, splits it, slices the payload once and calls the handler synchronously.

A frame larger than one read is collected as a list of reads and joined once it is whole, so a
payload of n bytes costs O(n), not O(n²). A frame for a subscription that is not routed
goes to nats-py, unless its subject or reply subject is not UTF-8: nats-py's decode would raise
in its reading task, which ends it (the connection reads nothing more); such a frame is dropped
and reported to the error callback instead. Every other operation (``PING``, ``PONG``, ``+OK``,
``-ERR``, ``INFO``, or a line nats-py does not know) is handed to nats-py's own parser, one
complete line at a time, so those keep nats-py's behaviour exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from nats.errors import ProtocolError
from nats.protocol.parser import Parser

from .._errors import UndecodableMessageError
from .._protocol.text import shown_bytes, subject_text

if TYPE_CHECKING:  # pragma: no cover
    from nats.aio.client import Client

__all__ = ["FrameHandler", "FrameParser"]

FrameHandler: TypeAlias = Callable[[bytes, bytes, "bytes | None", bytes], None]
"""``handler(subject, reply, header_block_or_None, payload)``; what it raises goes to the
client's error callback, as an exception in a subscription callback does."""

_CRLF = b"\r\n"
_MSG = b"MSG"
_HMSG = b"HMSG"


class FrameParser(Parser):
    """nats-py's ``Parser`` interface (``parse``, ``reset``) with frames cut by hand."""

    def __init__(self, nc: Client, routes: dict[int, FrameHandler]) -> None:
        self._routes = routes
        super().__init__(nc)  # calls reset()

    def reset(self) -> None:
        """Forget a partial frame (nats-py calls this when it reconnects)."""
        super().reset()
        self._parts: list[bytes] = []  # the unconsumed reads, oldest first
        self._held = 0  # their total size
        self._wanted = 0  # the size the first of them must reach before parsing resumes

    async def parse(self, data: bytes = b"") -> None:
        """Handle every whole frame in what was held plus ``data``; hold the rest.

        Raises:
            ProtocolError: a malformed ``MSG``/``HMSG`` line (nats-py then reconnects).
        """
        if self._parts:
            self._parts.append(data)
            self._held += len(data)
            if self._held < self._wanted:
                return
            data = b"".join(self._parts)
            self._parts, self._held, self._wanted = [], 0, 0
        nc: Any = self.nc
        routes = self._routes
        end = len(data)
        pos = 0
        routed = routed_bytes = 0  # added to nc.stats once per read, not per frame
        try:
            while pos < end:
                line_end = data.find(_CRLF, pos)
                if line_end < 0:
                    self._hold(data, pos, end - pos + 1)
                    return
                args = data[pos:line_end].split()
                # The deliveries of a pull (MSG/HMSG with a reply) inline, checked as
                # _frame_args checks them; every other shape goes through it.
                fields = len(args)
                if fields == 5 and args[0] == _MSG and (args[2] + args[4]).isdigit():
                    reply = args[3]
                    header_size = 0
                    size = int(args[4])
                    sid = int(args[2])
                elif (
                    fields == 6
                    and args[0] == _HMSG
                    and (args[2] + args[4] + args[5]).isdigit()
                    and (header_size := int(args[4])) <= (size := int(args[5]))
                ):
                    reply = args[3]
                    sid = int(args[2])
                elif fields and (args[0] == _HMSG or args[0] == _MSG):
                    sid, reply, header_size, size = _frame_args(args)
                else:
                    await super().parse(data[pos : line_end + 2])
                    pos = line_end + 2
                    continue
                start = line_end + 2
                frame_end = start + size + 2
                if frame_end > end:
                    self._hold(data, pos, frame_end - pos)
                    return
                pos = frame_end
                headers = data[start : start + header_size] if header_size else None
                payload = data[start + header_size : start + size]
                handler = routes.get(sid)
                if handler is None:
                    if _decodable(args[1], reply):
                        await nc._process_msg(sid, args[1], reply, payload, headers)
                    else:  # nats-py's decode would end its reading task: the connection goes deaf
                        await nc._error_cb(_undecodable(args[1], sid))
                    continue
                routed += 1
                routed_bytes += len(payload)
                try:
                    handler(args[1], reply, headers, payload)
                except Exception as exc:  # a bug there must not end nats-py's reading task
                    await nc._error_cb(exc)
        finally:
            stats = nc.stats
            stats["in_msgs"] += routed
            stats["in_bytes"] += routed_bytes

    def _hold(self, data: bytes, pos: int, wanted: int) -> None:
        """Keep ``data[pos:]`` until ``wanted`` bytes from there have arrived."""
        rest = data[pos:]
        self._parts, self._held, self._wanted = [rest], len(rest), wanted


def _decodable(subject: bytes, reply: bytes) -> bool:
    """Whether nats-py can decode a frame's subjects (see :mod:`jetstream._protocol.text`)."""
    if subject.isascii() and reply.isascii():
        return True
    return subject_text(subject) is not None and subject_text(reply) is not None


def _undecodable(subject: bytes, sid: int) -> UndecodableMessageError:
    return UndecodableMessageError(
        f"dropped a message for subscription {sid}: its subject {shown_bytes(subject)} or "
        "its reply subject is not UTF-8"
    )


def _frame_args(args: list[bytes]) -> tuple[int, bytes, int, int]:
    """``(sid, reply, header size, total size)`` of ``MSG subject sid [reply] size`` or
    ``HMSG subject sid [reply] header_size size``.

    Raises:
        ProtocolError: a missing or extra field, or a sid or size that is not a decimal number
            (nats-py's pattern is ``\\d+``: no sign, which would move the reader backwards),
            or a header larger than the message.
    """
    headed = args[0] == _HMSG
    fields = len(args) - headed
    # One isdigit over the joined fields (split() never yields an empty one): a generator
    # per field cost a quarter of the whole frame.
    if fields not in (4, 5):
        raise ProtocolError("nats: malformed MSG")
    numbers = args[2] + args[-2] + args[-1] if headed else args[2] + args[-1]
    if not numbers.isdigit():
        raise ProtocolError("nats: malformed MSG")
    header_size = int(args[-2]) if headed else 0
    size = int(args[-1])
    if header_size > size:
        raise ProtocolError("nats: malformed MSG")
    reply = args[3] if fields == 5 else b""
    return int(args[2]), reply, header_size, size
