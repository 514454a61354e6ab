"""KV watch groups: an elastic group over a bucket's stream, partitioned by key, so the
members share every change of the bucket while each key's changes are handled by one member
at a time, in revision order (docs/PCGROUPS-WIRE.md section 12).

Partitioning: one partitioning filter ``$KV.<bucket>.>`` without partitioning wildcards,
i.e. the transform ``{{Partition(N)}}.$KV.<bucket>.>``, which hashes the *whole subject*:
every key, whatever its number of tokens, has one partition, and a key's changes keep their
order in the work queue. (``*`` wildcards would need one filter per token count and a
bound; the whole-subject hash needs neither.) The group is an ordinary elastic group on
``KV_<bucket>``: its members are managed with :func:`add_members` and friends on
``bucket.stream``, and orbit.go can consume it too.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import Final, Self

import msgspec

from jetstream import ClientValidationError, ConsumerConfig, JetStream
from kvstore import Bucket
from kvstore._errors import missing_bucket

from ._assign import elastic_stream_name, validate_group_names, validate_member_name
from ._consume import consume_elastic
from ._elastic import add_members, create_elastic, delete_elastic
from ._errors import InvalidGroupConfigError, InvalidMemberConfigError
from ._group_member import GroupMember
from ._key_change import KeyChange, key_change
from ._message import GroupMessage
from ._models import ElasticConfig, PartitioningFilter

__all__ = [
    "BucketGroupWatch",
    "ChangeHandler",
    "bucket_group_filter",
    "create_bucket_group",
    "delete_bucket_group",
    "watch_group",
]

ChangeHandler = Callable[[KeyChange], Awaitable[None] | None]
_STRICT_ACK_PENDING: Final = 1
CATCH_UP: Final = 10.0
"""Seconds :func:`create_bucket_group` waits for the group's stream to read the bucket."""
_POLL: Final = 0.02


def bucket_group_filter(bucket: str) -> PartitioningFilter:
    """The partitioning filter of a watch group on ``bucket``: every key subject, the
    partition hashed over the whole subject (no partitioning wildcards)."""
    return PartitioningFilter(f"$KV.{bucket}.>", None)


def _checked_bucket(bucket: Bucket) -> Bucket:
    if not isinstance(bucket, Bucket):
        raise ClientValidationError(f"bucket must be a kvstore.Bucket, not {bucket!r}")
    return bucket


async def create_bucket_group(
    bucket: Bucket,
    group: str,
    *,
    max_members: int,
    members: Iterable[str] = (),
    max_buffered_msgs: int = 0,
    max_buffered_bytes: int = 0,
) -> ElasticConfig:
    """Create a watch group on ``bucket``: an elastic group on ``KV_<bucket>`` with
    ``max_members`` partitions, each key in one of them, then add ``members`` (more can be
    added and dropped later with :func:`add_members` / :func:`delete_members` on
    ``bucket.stream``). Creating it again the same way returns the stored config (members
    are added). Every change the bucket's stream holds when the group is created, and every
    later one, is delivered to the members (``bucket.watch(include_history=True)``'s view).

    Expiry markers (``Op.EXPIRED``) exist only when the bucket has ``marker_ttl``; without it
    an expired key vanishes without a change, for watch groups as for ``bucket.watch``.

    Raises:
        ClientValidationError: ``bucket`` is not a :class:`kvstore.Bucket`.
        InvalidGroupNameError: a bad group or member name.
        InvalidGroupConfigError: ``max_members`` below 1, negative buffered limits, repeated
            members. Nothing is written on any bad input.
        BucketNotFoundError: the bucket was deleted; nothing is written.
        GroupExistsError: an elastic group of that name exists on the bucket's stream with
            another partitioning; nothing is written.
    """
    _checked_bucket(bucket)
    validate_group_names(bucket.stream, group)
    names = _member_names(group, members)
    async with missing_bucket(bucket.js, bucket.name):
        held = (await bucket.js.stream_info(bucket.stream)).state.last_seq
        config = await create_elastic(
            bucket.js,
            bucket.stream,
            group,
            max_members=max_members,
            filters=[bucket_group_filter(bucket.name)],
            max_buffered_msgs=max_buffered_msgs,
            max_buffered_bytes=max_buffered_bytes,
        )
    await _wait_sourced(bucket.js, elastic_stream_name(bucket.stream, group), held)
    if names:
        config = await add_members(bucket.js, bucket.stream, group, names)
    return config


async def _wait_sourced(js: JetStream, stream: str, revision: int) -> None:
    """Wait (at most ``CATCH_UP``) until the work queue has read the bucket up to
    ``revision``: the server starts sourcing some 100 ms after the create, and a revision
    the bucket drops before that (overwritten beyond its history, purged) would never reach
    the group although it was stored when the group was created."""
    deadline = time.monotonic() + CATCH_UP
    while time.monotonic() < deadline:
        sources = (await js.stream_info(stream)).sources or []
        if any(s.active >= 0 and (s.seq >= revision or s.lag == 0) for s in sources):
            return
        await asyncio.sleep(_POLL)


def _member_names(group: str, members: Iterable[str]) -> tuple[str, ...]:
    if isinstance(members, str | bytes) or not isinstance(members, Iterable):
        raise InvalidGroupConfigError(f"members must be a list of names, not {members!r}")
    names = tuple(members)
    for name in names:
        validate_member_name(group, name)
    if len(set(names)) != len(names):
        raise InvalidGroupConfigError(f"repeated member in {list(names)}")
    return names


async def delete_bucket_group(bucket: Bucket, group: str) -> None:
    """Delete a watch group (:func:`delete_elastic` on ``bucket.stream``): its config, then
    its work-queue stream with the changes not yet processed; members end with
    :class:`GroupDeletedError`. The bucket is not touched.

    Raises:
        ClientValidationError: ``bucket`` is not a :class:`kvstore.Bucket`.
        InvalidGroupNameError: a bad group name; nothing is sent.
        GroupNotFoundError: no such group.
    """
    _checked_bucket(bucket)
    await delete_elastic(bucket.js, bucket.stream, group)


def _strict(config: ConsumerConfig | None) -> ConsumerConfig:
    if config is None:
        return ConsumerConfig(ack_policy="explicit", max_ack_pending=_STRICT_ACK_PENDING)
    if not isinstance(config, ConsumerConfig):
        raise InvalidMemberConfigError(f"config must be a ConsumerConfig, not {config!r}")
    if config.max_ack_pending:
        return config
    return msgspec.structs.replace(config, max_ack_pending=_STRICT_ACK_PENDING)


class BucketGroupWatch:
    """A member of a watch group; from :func:`watch_group`.

    ``async with`` starts it and stops it on exit (also when the block is cancelled). With a
    handler it runs by itself; without one, iterate it for :class:`KeyChange` objects.
    ``stop()`` ends it (another instance of the member takes over at once); ``done()`` waits
    for the end and raises what ended it.
    """

    def __init__(
        self,
        bucket: Bucket,
        group: str,
        member: str,
        handler: ChangeHandler | None,
        config: ConsumerConfig | None,
        confirm_acks: bool,
    ) -> None:
        self._bucket = bucket
        self._handler = handler
        self._member: GroupMember = consume_elastic(
            bucket.js,
            bucket.stream,
            group,
            member,
            None if handler is None else self._handle,
            config=_strict(config),
            confirm_acks=confirm_acks,
        )

    @property
    def bucket(self) -> Bucket:
        """The watched bucket."""
        return self._bucket

    @property
    def member(self) -> str:
        """The member name."""
        return self._member.member

    @property
    def partitions(self) -> tuple[int, ...]:
        """The partitions this member owns under the config it follows now."""
        return self._member.partitions

    async def start(self) -> Self:
        """Read the group's config, then follow it and consume.

        Raises:
            GroupNotFoundError: no such group.
            CorruptGroupConfigError: the stored config is unreadable.
        """
        await self._member.start()
        return self

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Stop consuming and end: a running handler finishes first (while its change's
        ``ack_wait`` lasts and the server answers), then changes received but not handled are
        handed back at once, within twice the request timeout whatever the server does, every
        task of the member ended (see :meth:`GroupMember.stop`). Safe to call from a handler
        and more than once."""
        await self._member.stop()

    async def done(self) -> None:
        """Wait until the member has ended.

        Raises:
            GroupDeletedError, GroupConfigChangedError, JetStreamError: what ended it (nothing
                when it was stopped).
        """
        await self._member.done()

    def __aiter__(self) -> Self:
        if self._handler is not None:
            raise ClientValidationError("this watch has a handler: it cannot be iterated")
        return self

    async def __anext__(self) -> KeyChange:
        while True:
            message = await self._member.__anext__()
            change = await key_change(self._bucket, message)
            if change is not None:
                return change

    async def _handle(self, message: GroupMessage) -> None:
        change = await key_change(self._bucket, message)
        if change is None or self._handler is None:
            return
        result = self._handler(change)
        if inspect.isawaitable(result):
            await result


def watch_group(
    bucket: Bucket,
    group: str,
    member: str,
    handler: ChangeHandler | None = None,
    *,
    config: ConsumerConfig | None = None,
    confirm_acks: bool = False,
) -> BucketGroupWatch:
    """Process the changes of ``bucket`` as ``member`` of the watch group ``group`` (see
    :func:`create_bucket_group`)::

        async with pcgroups.watch_group(bucket, "indexers", "m1") as changes:
            async for change in changes:    # change.key, .value, .revision, .op, .created
                ...
                await change.ack()

    Every change of the keys of the member's partitions is delivered at least once (a change
    not acknowledged is delivered again), one member at a time per key, in revision order.
    A name not (yet) among the group's members owns no partition and waits until it is
    added. ``handler`` (sync or async, called with each :class:`KeyChange`) makes it run by
    itself.
    ``config`` is a ConsumerConfig template as for :func:`consume_elastic`; by default, and
    whenever it leaves ``max_ack_pending`` unset, ``max_ack_pending`` is 1: a redelivered
    change (not acknowledged in ``ack_wait``, nak'ed, or handed over by a member that
    stopped or died) then always comes before any newer change of its key. A larger value
    lets a member receive ahead, at the price of that order after a redelivery.
    ``confirm_acks``: :meth:`KeyChange.ack` returns once the server has applied it, so no
    crash of the server brings the change back (see :func:`consume_elastic`).

    Raises:
        ClientValidationError: ``bucket`` is not a :class:`kvstore.Bucket`, or
            ``confirm_acks`` not a bool (at once).
        InvalidMemberConfigError: ``config`` is not a ConsumerConfig, or one the server
            refuses for any member, e.g. with a push ``deliver_subject`` (at once).
        InvalidGroupNameError: a bad group or member name (at once).
        GroupNotFoundError, CorruptGroupConfigError, InvalidGroupConfigError: from entering
            the context, as :func:`consume_elastic`.
    """
    _checked_bucket(bucket)
    validate_group_names(bucket.stream, group)
    validate_member_name(group, member)
    return BucketGroupWatch(bucket, group, member, handler, config, confirm_acks)
