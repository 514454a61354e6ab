"""Joining a group as a member: ``consume_static`` and ``consume_elastic``.

What differs between the two kinds lives here (:class:`GroupKind`): where the member's
consumer lives and how it is named and configured, exactly as orbit.go does
(docs/PCGROUPS-WIRE.md section 4), and which config changes a running member follows.
The member itself (:class:`GroupMember`) is the same for both.

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
    ClientValidationError,
    ConsumerConfig,
    ConsumerNotFoundError,
    JetStream,
)

from ._assign import (
    PRIORITY_GROUP,
    elastic_member_filters,
    elastic_stream_name,
    static_consumer_name,
    static_member_filters,
    validate_elastic_config,
    validate_group_names,
    validate_member_name,
    validate_static_config,
)
from ._errors import CorruptGroupConfigError, InvalidGroupConfigError
from ._filter_limits import check_filter_count, covering_pair
from ._group_member import GroupMember, Handler
from ._models import (
    ELASTIC_BUCKET,
    STATIC_BUCKET,
    ElasticConfig,
    StaticConfig,
    decode_elastic_config,
    decode_static_config,
)
from ._template import checked_template

__all__ = ["DEFAULT_ACK_WAIT", "GroupKind", "consume_elastic", "consume_static"]

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


def _decoded(decode: Callable[[bytes], Any], validate: Callable[[Any], None]) -> Any:
    def run(data: bytes) -> Any:
        config = decode(data)
        try:
            validate(config)
        except InvalidGroupConfigError as exc:
            raise CorruptGroupConfigError(f"the stored group config breaks a rule: {exc}") from exc
        return config

    return run


def _static_change(first: StaticConfig, new: StaticConfig) -> str | None:
    # orbit stops a static member on any change: its durable cannot take over partitions
    # whose messages it has already passed.
    return None if first == new else "config"


def _elastic_change(first: ElasticConfig, new: ElasticConfig) -> str | None:
    for name in ("max_members", "partitioning_filters", "max_buffered_msgs", "max_buffered_bytes"):
        if getattr(first, name) != getattr(new, name):
            return name
    return None


def _flag(value: bool, name: str) -> bool:
    if not isinstance(value, bool):
        raise ClientValidationError(f"{name} must be True or False, not {value!r}")
    return value


def consume_static(
    js: JetStream,
    stream: str,
    group: str,
    member: str,
    handler: Handler | None = None,
    *,
    config: ConsumerConfig | None = None,
    confirm_acks: bool = False,
) -> GroupMember:
    """Consume as ``member`` of the static group ``group`` on ``stream``.

    The member's durable ``<group>-<member>`` on ``stream`` (filters ``<p>.<filter>`` of its
    partitions, priority group ``PCG``, pinned) is created or updated, as orbit.go does, so
    Go and Python instances share it; one instance of a member receives at a time (the
    pinned one), others take over when it stops or dies. Use the result with ``async with``;
    with ``handler`` (sync or async, called with each :class:`GroupMessage` in order) it
    runs by itself, without one iterate it. ``config`` is a ConsumerConfig template (``ack_wait``
    default 5 s, ``max_ack_pending`` ...); names, filters and priority fields are set here.

    The member ends with :class:`GroupDeletedError` when the group is deleted and with
    :class:`GroupConfigChangedError` on any change of the config (orbit's rule: a static
    member cannot follow one); ``done()`` raises it.

    A server that crashes loses the acks it applied in its last ~0.1 s (it writes a
    consumer's state to disk at most ten times a second) and delivers those messages again,
    most with ``delivered`` 1. The member acknowledges again, without handing them out, the
    messages it acknowledged or terminated itself (its 1,024 latest). With ``confirm_acks``,
    ``ack()`` and ``term()`` return only once the server has applied them (a round trip
    each): on a replicated stream a quorum then holds the ack, so no crash of one server
    brings the message back, even when the member dies with it. On a single server the
    consumer's state still lags, and a message comes back to an instance that did not
    acknowledge it (the member died with the server, or another instance of it holds the
    pin after the restart): see docs/RELIABILITY.md.

    Raises:
        InvalidGroupNameError: a bad stream, group or member name (at once).
        InvalidMemberConfigError: ``config`` is not a ConsumerConfig, or one the server
            refuses for any member (a push ``deliver_subject``, more ``backoff`` steps than
            ``max_deliver`` ...) (at once).
        ClientValidationError: ``confirm_acks`` is not a bool (at once).
        GroupNotFoundError, MemberNotFoundError, CorruptGroupConfigError: from entering
            the context (or ``done()``): no such group, not a member, unreadable config.
        InvalidGroupConfigError: from entering the context (or ``done()``): the config
            (another client's) gives the member filters the server refuses (more than
            :data:`MAX_MEMBER_FILTERS`, one covering another).
    """
    validate_group_names(stream, group)
    validate_member_name(group, member)
    kind = GroupKind(
        kind="static",
        bucket=STATIC_BUCKET,
        stream=stream,
        group=group,
        member=member,
        consumer_stream=stream,
        consumer_name=static_consumer_name(group, member),
        template=checked_template(config),
        decode=_decoded(decode_static_config, validate_static_config),
        filters=lambda c: static_member_filters(c, member),
        incompatible=_static_change,
        elastic=False,
    )
    return GroupMember(js, kind, handler, confirm_acks=_flag(confirm_acks, "confirm_acks"))


def consume_elastic(
    js: JetStream,
    stream: str,
    group: str,
    member: str,
    handler: Handler | None = None,
    *,
    config: ConsumerConfig | None = None,
    confirm_acks: bool = False,
) -> GroupMember:
    """Consume as ``member`` of the elastic group ``group`` on ``stream``.

    The member's consumer ``<member>`` on the work-queue stream ``<stream>-<group>`` is
    created as orbit.go creates it (filters of its partitions, priority group ``PCG``, pinned,
    explicit acks, deleted by the server ``ack_wait`` after its last pull). The member
    follows membership changes: added, it joins; dropped, it stops consuming and its consumer
    is deleted (nothing stays pinned); its partitions changed, it lets the messages in
    progress finish (a running handler, iterated messages until settled; each as long as its
    ``ack_wait`` lasts from its delivery or its last ``in_progress()``), keeping its pin
    meanwhile, then recreates its consumer, so another member never gets a key while this
    one still works on it. A missing consumer is recreated. ``handler`` and ``config`` as in
    :func:`consume_static`.

    The member ends with :class:`GroupDeletedError` when the group is deleted and with
    :class:`GroupConfigChangedError` when ``max_members``, the partitioning filters or the
    buffered limits change.

    Server crashes and ``confirm_acks`` as in :func:`consume_static`, except for where the
    work queue keeps a message: on a single server an ack that ``confirm_acks`` waited for
    has removed it from the store, so no crash brings it back; on a replicated work queue the
    removal is a second replicated step after the confirmation, which a crash of the queue's
    leader can rarely lose (3 messages in 1 of 21 runs, docs/RELIABILITY.md).

    Raises:
        InvalidGroupNameError, InvalidMemberConfigError: as :func:`consume_static` (at once).
        GroupNotFoundError, CorruptGroupConfigError, InvalidGroupConfigError: from entering
            the context (or ``done()``), as :func:`consume_static`.
    """
    validate_group_names(stream, group)
    validate_member_name(group, member)
    kind = GroupKind(
        kind="elastic",
        bucket=ELASTIC_BUCKET,
        stream=stream,
        group=group,
        member=member,
        consumer_stream=elastic_stream_name(stream, group),
        consumer_name=member,
        template=checked_template(config),
        decode=_decoded(decode_elastic_config, validate_elastic_config),
        filters=lambda c: elastic_member_filters(c, member),
        incompatible=_elastic_change,
        elastic=True,
    )
    return GroupMember(js, kind, handler, confirm_acks=_flag(confirm_acks, "confirm_acks"))
