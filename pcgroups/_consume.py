"""Joining a group as a member: ``consume_static`` and ``consume_elastic``.

What differs between the two kinds is :class:`GroupKind` (``_kind``); the member itself
(:class:`GroupMember`) is the same for both.
"""

from __future__ import annotations

from jetstream import (
    ClientValidationError,
    ConsumerConfig,
    JetStream,
)

from ._assign import (
    elastic_member_filters,
    elastic_stream_name,
    static_consumer_name,
    static_member_filters,
    validate_elastic_config,
    validate_group_names,
    validate_member_name,
    validate_static_config,
)
from ._group_member import GroupMember, Handler
from ._kind import GroupKind, checked_decoder, elastic_change, static_change
from ._models import (
    ELASTIC_BUCKET,
    STATIC_BUCKET,
    decode_elastic_config,
    decode_static_config,
)
from ._template import checked_template

__all__ = ["consume_elastic", "consume_static"]


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
        decode=checked_decoder(decode_static_config, validate_static_config),
        filters=lambda c: static_member_filters(c, member),
        incompatible=static_change,
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
        decode=checked_decoder(decode_elastic_config, validate_elastic_config),
        filters=lambda c: elastic_member_filters(c, member),
        incompatible=elastic_change,
        elastic=True,
    )
    return GroupMember(js, kind, handler, confirm_acks=_flag(confirm_acks, "confirm_acks"))
