"""Blocking twins of pcgroups: the same names, arguments, results and errors, without ``async``.

::

    import jetstream.sync, pcgroups.sync

    with jetstream.sync.connect(url) as js:
        pcgroups.sync.create_elastic(js, "ORDERS", "shipping", max_members=2,
                                     filters=[pcgroups.PartitioningFilter("orders.*", [1])])
        pcgroups.sync.add_members(js, "ORDERS", "shipping", ["worker-a"])
        with pcgroups.sync.consume_elastic(js, "ORDERS", "shipping", "worker-a") as member:
            for msg in member:             # one at a time, in order per key
                ...
                msg.ack()                  # blocks until sent (or confirmed: confirm_acks)

The admin API (create, delete, members, mappings, configs, status, step-downs, listings)
blocks until done. A member (``consume_static``, ``consume_elastic``, ``watch_group``) is a
context manager that starts it and stops it on exit, and a plain iterator of its messages
(changes) whose ``ack()``, ``nak()``, ``term()`` and ``in_progress()`` block and may be called
from any thread.

**No handlers here.** The async API's ``handler`` argument (a callback the member calls for
each message) is left out of the twins: a handler runs on the client's event loop thread,
where a blocking call cannot run and a slow one would hold up every other call of the
connection. Iterate the member instead (in a thread of its own if the caller has other work),
or use the async API with ``js.aio`` when a handler is what you want.

Each handle drives its async twin (``.aio``) on the connection's loop thread (see
:mod:`jetstream.sync`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

import kvstore
from jetstream import ClientValidationError, ConsumerConfig, DurationValue
from jetstream._blocking.consume import PullMessage
from jetstream._blocking.portal import BlockingIterator, Portal, ReadAheadIterator
from jetstream.sync import JetStream
from kvstore import Entry, Op
from kvstore.sync import Bucket

from . import (
    _consume,
    _elastic,
    _group_member,
    _key_change,
    _members,
    _message,
    _static,
    _status,
    _watch_group,
)
from ._key_change import origin_revision
from ._models import ElasticConfig, MemberMapping, PartitioningFilter, StaticConfig
from ._status import GroupStatus

__all__ = [
    "BucketGroupWatch",
    "GroupMember",
    "GroupMessage",
    "KeyChange",
    "add_members",
    "consume_elastic",
    "consume_static",
    "create_bucket_group",
    "create_elastic",
    "create_static",
    "delete_bucket_group",
    "delete_elastic",
    "delete_member_mappings",
    "delete_members",
    "delete_static",
    "elastic_active_members",
    "elastic_config",
    "elastic_partition_filters",
    "elastic_status",
    "elastic_step_down",
    "list_elastic",
    "list_static",
    "origin_revision",
    "set_member_mappings",
    "static_active_members",
    "static_config",
    "static_status",
    "static_step_down",
    "watch_group",
]

M = TypeVar("M")

# -- static groups ------------------------------------------------------------------------------


def create_static(
    js: JetStream,
    stream: str,
    group: str,
    *,
    max_members: int,
    filters: Iterable[str] = (),
    members: Iterable[str] = (),
    member_mappings: Iterable[MemberMapping] = (),
) -> StaticConfig:
    """Blocking :func:`pcgroups.create_static` (same errors)."""
    created = _static.create_static(
        js.aio,
        stream,
        group,
        max_members=max_members,
        filters=filters,
        members=members,
        member_mappings=member_mappings,
    )
    return js.portal.call(created)


def static_config(js: JetStream, stream: str, group: str) -> StaticConfig:
    """Blocking :func:`pcgroups.static_config` (same errors)."""
    return js.portal.call(_static.static_config(js.aio, stream, group))


def list_static(js: JetStream, stream: str) -> Iterator[str]:
    """Blocking :func:`pcgroups.list_static`: the group names, as a plain iterator."""
    return ReadAheadIterator(js.portal, _static.list_static(js.aio, stream))


def delete_static(js: JetStream, stream: str, group: str) -> None:
    """Blocking :func:`pcgroups.delete_static` (same errors)."""
    js.portal.call(_static.delete_static(js.aio, stream, group))


def static_status(js: JetStream, stream: str, group: str) -> GroupStatus:
    """Blocking :func:`pcgroups.static_status` (same errors)."""
    return js.portal.call(_status.static_status(js.aio, stream, group))


def static_active_members(js: JetStream, stream: str, group: str) -> list[str]:
    """Blocking :func:`pcgroups.static_active_members` (same errors)."""
    return js.portal.call(_members.static_active_members(js.aio, stream, group))


def static_step_down(js: JetStream, stream: str, group: str, member: str) -> None:
    """Blocking :func:`pcgroups.static_step_down` (same errors)."""
    js.portal.call(_members.static_step_down(js.aio, stream, group, member))


# -- elastic groups -----------------------------------------------------------------------------


def create_elastic(
    js: JetStream,
    stream: str,
    group: str,
    *,
    max_members: int,
    filters: Iterable[PartitioningFilter] | None = None,
    max_buffered_msgs: int = 0,
    max_buffered_bytes: int = 0,
) -> ElasticConfig:
    """Blocking :func:`pcgroups.create_elastic` (same errors)."""
    created = _elastic.create_elastic(
        js.aio,
        stream,
        group,
        max_members=max_members,
        filters=filters,
        max_buffered_msgs=max_buffered_msgs,
        max_buffered_bytes=max_buffered_bytes,
    )
    return js.portal.call(created)


def elastic_config(js: JetStream, stream: str, group: str) -> ElasticConfig:
    """Blocking :func:`pcgroups.elastic_config` (same errors)."""
    return js.portal.call(_elastic.elastic_config(js.aio, stream, group))


def list_elastic(js: JetStream, stream: str) -> Iterator[str]:
    """Blocking :func:`pcgroups.list_elastic`: the group names, as a plain iterator."""
    return ReadAheadIterator(js.portal, _elastic.list_elastic(js.aio, stream))


def delete_elastic(js: JetStream, stream: str, group: str) -> None:
    """Blocking :func:`pcgroups.delete_elastic` (same errors)."""
    js.portal.call(_elastic.delete_elastic(js.aio, stream, group))


def add_members(js: JetStream, stream: str, group: str, members: Iterable[str]) -> ElasticConfig:
    """Blocking :func:`pcgroups.add_members` (same errors)."""
    return js.portal.call(_elastic.add_members(js.aio, stream, group, members))


def delete_members(js: JetStream, stream: str, group: str, members: Iterable[str]) -> ElasticConfig:
    """Blocking :func:`pcgroups.delete_members` (same errors)."""
    return js.portal.call(_elastic.delete_members(js.aio, stream, group, members))


def set_member_mappings(
    js: JetStream, stream: str, group: str, mappings: Iterable[MemberMapping]
) -> ElasticConfig:
    """Blocking :func:`pcgroups.set_member_mappings` (same errors)."""
    return js.portal.call(_elastic.set_member_mappings(js.aio, stream, group, mappings))


def delete_member_mappings(js: JetStream, stream: str, group: str) -> ElasticConfig:
    """Blocking :func:`pcgroups.delete_member_mappings` (same errors)."""
    return js.portal.call(_elastic.delete_member_mappings(js.aio, stream, group))


def elastic_partition_filters(
    js: JetStream, stream: str, group: str, member: str
) -> tuple[str, ...]:
    """Blocking :func:`pcgroups.elastic_partition_filters` (same errors)."""
    return js.portal.call(_elastic.elastic_partition_filters(js.aio, stream, group, member))


def elastic_status(js: JetStream, stream: str, group: str) -> GroupStatus:
    """Blocking :func:`pcgroups.elastic_status` (same errors)."""
    return js.portal.call(_status.elastic_status(js.aio, stream, group))


def elastic_active_members(js: JetStream, stream: str, group: str) -> list[str]:
    """Blocking :func:`pcgroups.elastic_active_members` (same errors)."""
    return js.portal.call(_members.elastic_active_members(js.aio, stream, group))


def elastic_step_down(js: JetStream, stream: str, group: str, member: str) -> None:
    """Blocking :func:`pcgroups.elastic_step_down` (same errors)."""
    js.portal.call(_members.elastic_step_down(js.aio, stream, group, member))


# -- KV watch groups ----------------------------------------------------------------------------


def create_bucket_group(
    bucket: Bucket,
    group: str,
    *,
    max_members: int,
    members: Iterable[str] = (),
    max_buffered_msgs: int = 0,
    max_buffered_bytes: int = 0,
) -> ElasticConfig:
    """Blocking :func:`pcgroups.create_bucket_group`: ``bucket`` is a blocking
    :class:`kvstore.sync.Bucket` (same errors)."""
    created = _watch_group.create_bucket_group(
        _aio_bucket(bucket),
        group,
        max_members=max_members,
        members=members,
        max_buffered_msgs=max_buffered_msgs,
        max_buffered_bytes=max_buffered_bytes,
    )
    return bucket.portal.call(created)


def delete_bucket_group(bucket: Bucket, group: str) -> None:
    """Blocking :func:`pcgroups.delete_bucket_group`: ``bucket`` is a blocking
    :class:`kvstore.sync.Bucket` (same errors)."""
    bucket.portal.call(_watch_group.delete_bucket_group(_aio_bucket(bucket), group))


def _aio_bucket(bucket: Bucket) -> kvstore.Bucket:
    """The async bucket a blocking one drives.

    Raises:
        ClientValidationError: ``bucket`` is not a blocking bucket (as the async API
            refuses what is not a :class:`kvstore.Bucket`).
    """
    if not isinstance(bucket, Bucket):
        raise ClientValidationError(f"bucket must be a kvstore.sync.Bucket, not {bucket!r}")
    return bucket.aio


# -- members ------------------------------------------------------------------------------------


def consume_static(
    js: JetStream,
    stream: str,
    group: str,
    member: str,
    *,
    config: ConsumerConfig | None = None,
    confirm_acks: bool = False,
) -> GroupMember:
    """Blocking :func:`pcgroups.consume_static` without a handler: ``with`` it, iterate it
    for :class:`GroupMessage` objects and settle each (same errors: bad input at once, the
    rest on entering)."""
    made = _consume.consume_static(
        js.aio, stream, group, member, config=config, confirm_acks=confirm_acks
    )
    return GroupMember(made, js.portal)


def consume_elastic(
    js: JetStream,
    stream: str,
    group: str,
    member: str,
    *,
    config: ConsumerConfig | None = None,
    confirm_acks: bool = False,
) -> GroupMember:
    """Blocking :func:`pcgroups.consume_elastic` without a handler: ``with`` it, iterate it
    for :class:`GroupMessage` objects and settle each (same errors: bad input at once, the
    rest on entering)."""
    made = _consume.consume_elastic(
        js.aio, stream, group, member, config=config, confirm_acks=confirm_acks
    )
    return GroupMember(made, js.portal)


def watch_group(
    bucket: Bucket,
    group: str,
    member: str,
    *,
    config: ConsumerConfig | None = None,
    confirm_acks: bool = False,
) -> BucketGroupWatch:
    """Blocking :func:`pcgroups.watch_group` without a handler: ``with`` it, iterate it for
    :class:`KeyChange` objects and settle each; ``bucket`` is a blocking
    :class:`kvstore.sync.Bucket` (same errors: bad input at once, the rest on entering)."""
    made = _watch_group.watch_group(
        _aio_bucket(bucket), group, member, config=config, confirm_acks=confirm_acks
    )
    return BucketGroupWatch(made, bucket)


class _RunningMember(Generic[M]):
    """A member as a context manager (start, stop on exit) and a plain iterator of what it
    receives (``M``, blocking twins of the async items)."""

    def __init__(
        self,
        member: _group_member.GroupMember | _watch_group.BucketGroupWatch,
        portal: Portal,
        convert: Callable[[Any], M],
    ) -> None:
        self.aio = member
        self.portal = portal
        self._started = False
        self._items: BlockingIterator[M] = BlockingIterator(
            portal, member, stop=member.stop, convert=convert
        )

    @property
    def member(self) -> str:
        """The member name."""
        return self.aio.member

    @property
    def partitions(self) -> tuple[int, ...]:
        """The partitions this member owns under the config it follows now."""
        return self.aio.partitions

    def start(self) -> Self:
        """Blocking ``start()`` of the async member (:meth:`pcgroups.GroupMember.start`,
        same errors); ``with`` calls it."""
        self.portal.call(self.aio.start())
        self._started = True
        return self

    def stop(self) -> None:
        """Blocking ``stop()`` of the async member (see :meth:`pcgroups.GroupMember.stop`):
        messages handed out are not waited for; settle them first."""
        self.portal.call(self.aio.stop())

    def done(self) -> None:
        """Wait until the member has ended (blocking ``done()``; raises what ended it:
        GroupDeletedError, GroupConfigChangedError, JetStreamError)."""
        self.portal.call(self.aio.done())

    def __iter__(self) -> Iterator[M]:
        if not self._started:  # the async twin would say `async with`
            raise ClientValidationError(
                f"group member {self.member} is not started: use it with `with` first"
            )
        return self._items

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._items.close()
        if not self.portal.closed:
            self.portal.call(self.aio.stop())

    def __repr__(self) -> str:
        return f"<blocking {self.aio!r}>"


class GroupMember(_RunningMember["GroupMessage"]):
    """A running member of a group (:class:`pcgroups.GroupMember`, iterator mode)::

    with pcgroups.sync.consume_static(js, "ORDERS", "g", "m1") as member:
        for msg in member:
            ...
            msg.ack()

    Leaving the ``with`` block stops the member (a ``break`` out of the loop alone does not:
    iterate again for more): the pin is released, so another instance of it takes over at
    once.
    """

    def __init__(self, member: _group_member.GroupMember, portal: Portal) -> None:
        super().__init__(member, portal, lambda m: GroupMessage(m, portal))


class BucketGroupWatch(_RunningMember["KeyChange"]):
    """A member of a KV watch group (:class:`pcgroups.BucketGroupWatch`, iterator mode)::

    with pcgroups.sync.watch_group(bucket, "indexers", "m1") as changes:
        for change in changes:      # change.key, .value, .revision, .op, .created
            ...
            change.ack()
    """

    def __init__(self, watch: _watch_group.BucketGroupWatch, bucket: Bucket) -> None:
        super().__init__(watch, bucket.portal, lambda c: KeyChange(c, bucket.portal))
        self._bucket = bucket

    @property
    def bucket(self) -> Bucket:
        """The watched (blocking) bucket."""
        return self._bucket


class GroupMessage:
    """A member's message (:class:`pcgroups.GroupMessage`) whose acknowledgements block;
    ``subject`` (without the partition token) and ``partition`` as there."""

    __slots__ = ("aio", "partition", "portal", "subject")

    def __init__(self, message: _message.GroupMessage, portal: Portal) -> None:
        self.aio = message
        self.portal = portal
        self.subject = message.subject
        self.partition = message.partition

    @property
    def data(self) -> bytes:
        """The payload."""
        return self.aio.data

    @property
    def headers(self) -> dict[str, str]:
        """The headers (``Nats-Pin-Id`` among them)."""
        return self.aio.headers

    @property
    def settled(self) -> bool:
        """True once ack, nak or term was sent."""
        return self.aio.settled

    @property
    def raw(self) -> PullMessage:
        """The underlying JetStream message, blocking (full subject, metadata; settling it
        directly bypasses the member's bookkeeping, as in the async API)."""
        return PullMessage(self.aio.raw, self.portal)

    def ack(self) -> None:
        """Blocking :meth:`pcgroups.GroupMessage.ack` (same errors)."""
        self.portal.call(self.aio.ack())

    def nak(self, delay: DurationValue | None = None) -> None:
        """Blocking :meth:`pcgroups.GroupMessage.nak` (same errors)."""
        self.portal.call(self.aio.nak(delay))

    def term(self) -> None:
        """Blocking :meth:`pcgroups.GroupMessage.term` (same errors)."""
        self.portal.call(self.aio.term())

    def in_progress(self) -> None:
        """Blocking :meth:`pcgroups.GroupMessage.in_progress` (same errors)."""
        self.portal.call(self.aio.in_progress())

    def __repr__(self) -> str:
        return f"<blocking {self.aio!r}>"


class KeyChange:
    """One change of a watched bucket (:class:`pcgroups.KeyChange`) whose acknowledgements
    block; ``key``, ``revision``, ``op`` and ``created`` as there, ``message`` the blocking
    :class:`GroupMessage`."""

    __slots__ = ("aio", "created", "key", "message", "op", "portal", "revision")

    def __init__(self, change: _key_change.KeyChange, portal: Portal) -> None:
        self.aio = change
        self.portal = portal
        self.message = GroupMessage(change.message, portal)
        self.key: str = change.key
        self.revision: int = change.revision
        self.op: Op = change.op
        self.created: datetime = change.created

    @property
    def value(self) -> bytes:
        """As :attr:`pcgroups.KeyChange.value` (raises the bucket's DecryptionError...)."""
        return self.aio.value

    @property
    def entry(self) -> Entry:
        """As :attr:`pcgroups.KeyChange.entry`."""
        return self.aio.entry

    @property
    def partition(self) -> int:
        """The group partition of the key."""
        return self.aio.partition

    @property
    def delivered(self) -> int:
        """How many times this change was delivered (> 1: a redelivery)."""
        return self.aio.delivered

    def ack(self) -> None:
        """Blocking :meth:`pcgroups.KeyChange.ack` (same errors)."""
        self.portal.call(self.aio.ack())

    def nak(self, delay: DurationValue | None = None) -> None:
        """Blocking :meth:`pcgroups.KeyChange.nak` (same errors)."""
        self.portal.call(self.aio.nak(delay))

    def term(self) -> None:
        """Blocking :meth:`pcgroups.KeyChange.term` (same errors)."""
        self.portal.call(self.aio.term())

    def in_progress(self) -> None:
        """Blocking :meth:`pcgroups.KeyChange.in_progress` (same errors)."""
        self.portal.call(self.aio.in_progress())

    def __repr__(self) -> str:
        return f"<blocking {self.aio!r}>"
