"""What differs between static and elastic group members (:class:`GroupKind`): where the
member's consumer lives and how it is named and configured, exactly as orbit.go does
(docs/PCGROUPS-WIRE.md section 4), and which config changes a running member follows.

Defaults against orbit's: ``ack_wait`` 5 s when the template has none (orbit
``defaultAckWait``); pin timeout ``max(ack_wait, 1 s)``; pulls expire after
``max(ack_wait / 2, 1 s)``; elastic consumers are deleted by the server ``ack_wait`` after
their last pull (``inactive_threshold``). Other template fields (``max_ack_pending`` ...) are
the caller's, the server's defaults otherwise.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Final

import msgspec

from jetstream import (
    ConsumerConfig,
    ConsumerNotFoundError,
    JetStream,
)

from ._assign import (
    PRIORITY_GROUP,
)
from ._errors import CorruptGroupConfigError, InvalidGroupConfigError
from ._filter_limits import check_filter_count, covering_pair
from ._models import (
    ElasticConfig,
    StaticConfig,
)

__all__ = [
    "DEFAULT_ACK_WAIT",
    "GroupKind",
    "checked_decoder",
    "elastic_change",
    "static_change",
]

DEFAULT_ACK_WAIT: Final = 5.0
"""Seconds; orbit's ``defaultAckWait``, used when the template sets no ``ack_wait``."""
_MIN_PIN_TIMEOUT: Final = 1.0


@dataclasses.dataclass(frozen=True)
class GroupKind:
    """How one kind of group maps a config to a member's consumer."""

    kind: str
    bucket: str
    stream: str
    group: str
    member: str
    consumer_stream: str
    """The stream the member's consumer lives on."""
    consumer_name: str
    template: ConsumerConfig
    decode: Callable[[bytes], Any]
    filters: Callable[[Any], tuple[str, ...]]
    incompatible: Callable[[Any, Any], str | None]
    """What changed between the first config and a new one that the member cannot follow."""
    elastic: bool

    @property
    def ack_wait(self) -> float:
        wait = self.template.ack_wait
        return DEFAULT_ACK_WAIT if wait is None else wait.total_seconds()

    @property
    def pull_expires(self) -> float:
        return max(self.ack_wait / 2, 1.0)

    def consumer_config(self, config: Any) -> ConsumerConfig | None:
        """The member's consumer under ``config``, or None when it owns no partition.

        Raises:
            InvalidGroupConfigError: ``config`` (written by another client) gives the member
                filters the server refuses: more than :data:`MAX_MEMBER_FILTERS`, or one
                covering another.
        """
        filters = self.filters(config)
        if not filters:
            return None
        self._check_filters(filters)
        ack_wait = timedelta(seconds=self.ack_wait)
        fields: dict[str, Any] = {
            "filter_subject": "",
            "filter_subjects": list(filters),
            "ack_wait": ack_wait,
            "priority_groups": [PRIORITY_GROUP],
            "priority_policy": "pinned_client",
            "priority_timeout": timedelta(seconds=max(self.ack_wait, _MIN_PIN_TIMEOUT)),
        }
        if self.elastic:
            fields.update(
                name=self.consumer_name,
                durable_name="",
                ack_policy="explicit",
                inactive_threshold=ack_wait,
            )
        else:
            fields.update(name="", durable_name=self.consumer_name)
            if self.template.ack_policy != "all":
                fields["ack_policy"] = "explicit"
        return msgspec.structs.replace(self.template, **fields)

    def _check_filters(self, filters: tuple[str, ...]) -> None:
        check_filter_count(len(filters), f"member {self.member!r} of the {self.kind} group")
        # filters of different partitions never overlap: their first tokens differ
        partition = filters[0].split(".", 1)[0] + "."
        pair = covering_pair([f for f in filters if f.startswith(partition)])
        if pair is not None:
            raise InvalidGroupConfigError(
                f"the {self.kind} group config gives member {self.member!r} the filter "
                f"{pair[1]!r}, which covers its filter {pair[0]!r}: the server refuses that"
            )

    async def create(self, js: JetStream, config: ConsumerConfig) -> None:
        """Create the member's consumer (done already with this config: nothing happens).

        Raises:
            ConsumerExistsError: the name holds another config (the member replaces it with
                :meth:`replace` once no instance uses it).
            JetStreamError: the server refused (e.g. 10100 while members' filters still
                overlap on the work queue; the member retries).
        """
        await js.create_consumer_info(self.consumer_stream, config, action="create")

    async def replace(self, js: JetStream, config: ConsumerConfig) -> None:
        """Replace the member's consumer that holds another config: an elastic one is deleted
        and created again (orbit's way: its new partitions may lie behind the old
        consumer's position), a static durable is updated (it keeps its position).

        Raises:
            ConsumerExistsError: (elastic) created again meanwhile by another instance.
            JetStreamError: the server refused (an update of a setting it cannot change).
        """
        if self.elastic:
            with contextlib.suppress(ConsumerNotFoundError):
                await js.delete_consumer(self.consumer_stream, self.consumer_name)
            await self.create(js, config)
        else:
            await js.create_consumer_info(self.consumer_stream, config, action="")


def checked_decoder(decode: Callable[[bytes], Any], validate: Callable[[Any], None]) -> Any:
    """``decode`` then ``validate``: a stored config that breaks a rule is corrupt."""

    def run(data: bytes) -> Any:
        config = decode(data)
        try:
            validate(config)
        except InvalidGroupConfigError as exc:
            raise CorruptGroupConfigError(f"the stored group config breaks a rule: {exc}") from exc
        return config

    return run


def static_change(first: StaticConfig, new: StaticConfig) -> str | None:
    """What changed that a running static member cannot follow (None: nothing)."""
    # orbit stops a static member on any change: its durable cannot take over partitions
    # whose messages it has already passed.
    return None if first == new else "config"


def elastic_change(first: ElasticConfig, new: ElasticConfig) -> str | None:
    """The partitioning setting that changed (a running elastic member ends), or None."""
    for name in ("max_members", "partitioning_filters", "max_buffered_msgs", "max_buffered_bytes"):
        if getattr(first, name) != getattr(new, name):
            return name
    return None
