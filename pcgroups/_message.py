"""A message received by a group member: the subject without the partition token, the
partition number, and acknowledgements that tell the member the message is settled."""

from __future__ import annotations

from collections.abc import Callable

from jetstream import ClientValidationError, DurationValue
from jetstream._duration import seconds_of
from jetstream._pull import PullMessage

__all__ = ["GroupMessage"]


class GroupMessage:
    """One message of a member's partitions (orbit ``ConsumerGroupMsg``).

    ``subject`` is the stream subject without the leading partition token, ``partition`` that
    token as a number. ``ack``, ``nak`` and ``term`` settle the message: a member waits for
    its settled messages before it hands partitions to another member.
    """

    __slots__ = ("_msg", "_on_settled", "partition", "settled", "subject")

    def __init__(self, msg: PullMessage, on_settled: Callable[[GroupMessage], None]) -> None:
        self._msg = msg
        self._on_settled = on_settled
        token, _, rest = msg.subject.partition(".")
        self.subject: str = rest
        """The subject after the partition token (orbit strips up to the first ``.``)."""
        self.partition: int = int(token) if token.isdigit() else -1
        """The partition the message belongs to (-1 if the first token is not a number)."""
        self.settled = False
        """True once ack, nak or term was sent."""

    @property
    def data(self) -> bytes:
        """The payload."""
        return self._msg.data

    @property
    def headers(self) -> dict[str, str]:
        """The headers (``Nats-Pin-Id`` among them)."""
        return self._msg.headers

    @property
    def raw(self) -> PullMessage:
        """The underlying JetStream message (full subject, metadata)."""
        return self._msg

    def _settle(self) -> None:
        if not self.settled:
            self.settled = True
            self._on_settled(self)

    async def ack(self) -> None:
        """Acknowledge: processed, never redelivered.

        Raises:
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
        """
        try:
            await self._msg.ack()
        finally:
            self._settle()

    async def nak(self, delay: DurationValue | None = None) -> None:
        """Ask for redelivery, after ``delay`` (seconds or a timedelta) if given.

        Raises:
            ClientValidationError: ``delay`` negative or not a duration (nothing is sent).
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
        """
        seconds = None if delay is None else seconds_of(delay, name="delay")
        if seconds is not None and seconds < 0:
            raise ClientValidationError(f"delay must not be negative: {seconds:g}s")
        try:
            await self._msg.nak(seconds)
        finally:
            self._settle()

    async def term(self) -> None:
        """Never redeliver this message.

        Raises:
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
        """
        try:
            await self._msg.term()
        finally:
            self._settle()

    async def in_progress(self) -> None:
        """Still working on it: resets the ack timer (does not settle).

        Raises:
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
        """
        await self._msg.in_progress()

    def __repr__(self) -> str:
        return f"<GroupMessage p{self.partition} {self.subject} {len(self.data)}B>"
