"""Joining as one instance of a group member: creating the member's consumer, or taking over
the one that holds another config once no instance uses it.

The member's consumer holds another config when the member's partitions changed (the
previous consumer is still there) or when another instance of the member runs with other
settings (a rolling upgrade changing ``ack_wait``, say). Deleting (elastic) or updating
(static) it under an instance that works on one of its messages would hand that message to a
second instance at once, so it is replaced only when nothing shows an instance at work
(``_consumer_use``), and the last look is taken with its deliveries paused: between a look
and the replacement a message could otherwise still reach an instance (right after a
step-down, an instance's waiting pull is refused at the next message and pulled again, and
for that moment nothing shows it at work).

A refusal the server repeats (a setting it never accepts) ends the member instead of it
asking again for good.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final

from jetstream import (
    ClientValidationError,
    ConnectionClosedError,
    Consumer,
    ConsumerConfig,
    ConsumerExistsError,
    ConsumerInfo,
    JetStream,
    JetStreamError,
    ServerError,
)

from ._consumer_use import consumer_in_use, server_now, settings_differences
from ._errors import MemberConsumerRefusedError

if TYPE_CHECKING:
    from ._kind import GroupKind

__all__ = ["MemberJoin"]

_log = logging.getLogger("pcgroups")
_REFUSALS: Final = 3  # the same refusal of the member's consumer this often in a row ends it
_REFUSING: Final = frozenset({400, 404, 500})  # a server's answer that it will not create it
_PASSING: Final = frozenset({10100})  # refusals that pass: work-queue filters overlapping
_PAUSE_LOOKS: Final = 5  # consumer infos to see a pause applied before giving up this join
_PAUSE_TIMEOUTS: Final = 2  # a pause lasts this many request timeouts if nobody ends it


class MemberJoin:
    """The joins of one instance of a member (``kind``), with what they remember: the
    consumer it joined last, the other settings it warned about, the server's refusals."""

    def __init__(self, js: JetStream, kind: GroupKind) -> None:
        self._js = js
        self._kind = kind
        self._bound: datetime | None = None  # when the consumer it joined last was created
        self._differences: list[str] = []  # the other settings last warned about
        self._refusals = (0, 0)  # (err_code, times in a row) of the server's refusals

    async def join(self, desired: ConsumerConfig, pin: str) -> Consumer | None:
        """Create the member's consumer, or replace the one holding another config if no
        instance uses it (``pin``: this instance's pin on the consumer it used last); None
        when it cannot be now (the member tries again later).

        Raises:
            ConnectionClosedError: the connection is closed.
            ClientValidationError: the consumer cannot be asked for (its request is larger
                than the server's max_payload, say): it never could.
            MemberConsumerRefusedError: the server refused it the same way 3 times in a row.
        """
        kind = self._kind
        try:
            try:
                await kind.create(self._js, desired)
            except ConsumerExistsError:
                if not await self._replace(desired, pin):
                    return None
            consumer = await self._js.consumer(kind.consumer_stream, kind.consumer_name)
        except (ConnectionClosedError, ClientValidationError):
            raise
        except JetStreamError as exc:  # 10100 while filters overlap, stream gone ...: retry
            _log.debug("member %s cannot join yet: %r", kind.member, exc)
            self._count_refusal(exc)
            return None
        self._refusals = (0, 0)
        self._bound = consumer.cached_info.created
        return consumer

    async def _replace(self, desired: ConsumerConfig, pin: str) -> bool:
        """Replace the consumer holding another config if no instance uses it, else False:
        an instance that stops using it lets it go (the pinned one deletes it on a change of
        partitions, the server an elastic one once nobody pulls). Once it looks unused its
        deliveries are paused, it is looked at again, and only then replaced (an elastic
        one deleted and created anew, a static one updated) or let go on."""
        kind, js = self._kind, self._js
        info = await js.consumer_info(kind.consumer_stream, kind.consumer_name)
        self._warn_about(info, desired)
        if self._used(info, pin):
            return False
        hold = timedelta(seconds=_PAUSE_TIMEOUTS * js.timeout)  # if we die meanwhile
        await js.pause_consumer(kind.consumer_stream, kind.consumer_name, server_now(info) + hold)
        replaced = False
        try:
            paused = await self._paused_info()
            if paused is not None and not self._used(paused, pin):  # nothing is handed out
                await kind.replace(js, desired)
                replaced = True
        finally:
            if not (replaced and kind.elastic):  # a static update keeps the pause
                with contextlib.suppress(JetStreamError):
                    await js.pause_consumer(kind.consumer_stream, kind.consumer_name, None)
        return replaced

    async def _paused_info(self) -> ConsumerInfo | None:
        """The consumer's info once it shows the pause (a cluster applies it a moment after
        answering), or None if it does not after a few looks."""
        kind = self._kind
        for _ in range(_PAUSE_LOOKS):
            info = await self._js.consumer_info(kind.consumer_stream, kind.consumer_name)
            if info.paused:
                return info
        return None

    def _used(self, info: ConsumerInfo, pin: str) -> bool:
        """Whether an instance other than this one may be working with the consumer."""
        busy = consumer_in_use(info, bound=self._bound, pin=pin)
        if busy is not None:
            _log.debug("member %s: its consumer is in use (%s): waiting", self._kind.member, busy)
        return busy is not None

    def _warn_about(self, info: ConsumerInfo, desired: ConsumerConfig) -> None:
        """Say once per difference when the consumer has settings other than this
        instance's (another instance runs with them)."""
        if info.config is None:
            return
        differences = settings_differences(info.config, desired)
        if not differences and info.config.filter_subjects == desired.filter_subjects:
            differences = ["fields this instance leaves to the server's defaults differ"]
        if not differences or differences == self._differences:
            return
        self._differences = differences
        kind = self._kind
        _log.warning(
            "group member %s (%s group %s on %s): its consumer %s has other settings: %s. "
            "Another instance of the member runs with them; this one waits until no instance "
            "uses that consumer, then replaces it",
            kind.member, kind.kind, kind.group, kind.stream, kind.consumer_name,
            "; ".join(differences),
        )  # fmt: skip

    def _count_refusal(self, exc: JetStreamError) -> None:
        """Count the server's refusals of the member's consumer: the same one three times in
        a row can only be a setting it never accepts (400), one it cannot change on an
        existing durable (500, 10012: a rolling upgrade changing ``mem_storage``, say) or a
        stream that is gone (404). 10100 does not count (it lasts only while members apply a
        change of partitions), nor a consumer made meanwhile by another instance, nor a
        server that cannot answer now (503, timeouts).

        Raises:
            MemberConsumerRefusedError: the third one in a row.
        """
        passing = isinstance(exc, ConsumerExistsError) or exc.err_code in _PASSING
        if not isinstance(exc, ServerError) or exc.code not in _REFUSING or passing:
            self._refusals = (0, 0)
            return
        code, count = self._refusals
        count = count + 1 if code == exc.err_code else 1
        self._refusals = (exc.err_code, count)
        if count >= _REFUSALS:
            kind = self._kind
            raise MemberConsumerRefusedError(kind.member, kind.consumer_stream, exc) from exc
