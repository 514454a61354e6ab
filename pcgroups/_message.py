"""A message received by a group member: the subject without the partition token, the
partition number, and acknowledgements that tell the member the message is settled."""

from __future__ import annotations

from collections.abc import Callable

from jetstream import ClientValidationError, DurationValue
from jetstream._consume.pull_message import PullMessage
from jetstream._protocol.duration import seconds_of

__all__ = ["GroupMessage"]


class GroupMessage:
    """One message of a member's partitions (orbit ``ConsumerGroupMsg``).

    ``subject`` is the stream subject without the leading partition token, ``partition`` that
    token as a number. ``ack``, ``nak`` and ``term`` settle the message: a member waits for
    its settled messages before it hands partitions to another member. With ``confirm``
    (the member's ``confirm_acks``) ``ack`` and ``term`` return once the server confirms.
    """

    __slots__ = ("_confirm", "_msg", "_on_settled", "partition", "settled", "subject")

    def __init__(
        self,
        msg: PullMessage,
        on_settled: Callable[[GroupMessage, bool], None],
        *,
        confirm: bool = False,
    ) -> None:
        self._msg = msg
        self._on_settled = on_settled
        self._confirm = confirm
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

    def _settle(self, final: bool = False) -> None:
        """``final``: an ack or term was sent (and confirmed, with ``confirm``)."""
        if not self.settled:
            self.settled = True
            self._on_settled(self, final)

    async def ack(self) -> None:
        """Acknowledge: processed, never redelivered. With the member's ``confirm_acks``,
        return once the server has applied it (see :func:`consume_static`).

        Raises:
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
            RequestTimeoutError: (``confirm_acks``) no confirmation within 5 s; the message
                may come again.
        """
        sent = False
        try:
            await self._msg.ack(wait=self._confirm)
            sent = True
        finally:
            self._settle(sent)

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
        """Never redeliver this message (confirmed as :meth:`ack` is).

        Raises:
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
            RequestTimeoutError: (``confirm_acks``) no confirmation within 5 s.
        """
        sent = False
        try:
            await self._msg.term(wait=self._confirm)
            sent = True
        finally:
            self._settle(sent)

    async def in_progress(self) -> None:
        """Still working on it: resets the ack timer (does not settle).

        Raises:
            ConnectionClosedError, DisconnectedError: the connection is closed or down.
        """
        await self._msg.in_progress()

    def __repr__(self) -> str:
        return f"<GroupMessage p{self.partition} {self.subject} {len(self.data)}B>"
