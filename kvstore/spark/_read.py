"""Batch reads: one snapshot of the bucket, pinned at planning, divided among the partitions
so that each reads only its share (see ``kvstore._ranges``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from jetstream._api.stream_subjects import stream_subjects
from jetstream._options import run_sync

from .._manage import bucket_info
from .._models import Op, op_from_headers, stream_name, subject_prefix
from .._ranges import LastCheck, read_keys, read_latest, split_range, split_subjects
from .._snapshot import Witness, newest_message
from ._options import Options, encryption_stage
from ._rows import row
from ._session import task_session

__all__ = ["KVPartition", "KVReader", "SnapshotPlan", "plan_snapshot"]


@dataclasses.dataclass
class KVPartition(InputPartition):
    """A share of the snapshot at stream sequence ``up_to``: the keys whose last revision
    there lies in ``first..last``, or (``subjects`` given) those keys."""

    first: int
    last: int
    up_to: int
    check: LastCheck
    subjects: list[str] | None = None
    witness: Witness | None = None  # the message at up_to (with subjects)


class KVReader(DataSourceReader):
    """A consistent snapshot: the bucket as of the stream sequence taken at planning, divided
    among the partitions so that each reads only its share (see ``kvstore._ranges``)."""

    def __init__(
        self, opts: Options, projection: tuple[tuple[str, bool], ...], plan: SnapshotPlan
    ) -> None:
        self.opts = opts
        self.projection = projection
        self.plan = plan

    def partitions(self) -> list[KVPartition]:
        plan, parts = self.plan, self.opts.partitions
        if plan.subjects is not None:
            return [
                KVPartition(1, plan.up_to, plan.up_to, plan.check, share, plan.witness)
                for share in split_subjects(plan.subjects, parts)
            ] or [KVPartition(1, 0, 0, plan.check, [])]
        ranges = split_range(plan.first, plan.up_to, parts)
        return [KVPartition(lo, hi, plan.up_to, plan.check) for lo, hi in ranges] or [
            KVPartition(1, 0, 0, plan.check)  # an empty bucket: one partition without rows
        ]

    def __getstate__(self) -> dict[str, Any]:
        """Spark ships the reader with every task, for ``read`` only: without the planned key
        list (each partition carries its own share; a copy asked for partitions reads the
        ranges of the ``SUFFIX`` check instead, which is exact too)."""
        state = dict(self.__dict__)
        state["plan"] = dataclasses.replace(self.plan, subjects=None)
        return state

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, KVPartition)
        yield from run_sync(lambda: _read_snapshot(self.opts, self.projection, partition))


@dataclasses.dataclass(frozen=True)
class SnapshotPlan:
    """What a snapshot read pins at planning: its sequences, how a partition tells a key's
    last revision, and (``KEYS``) the keys' subjects, listed after ``up_to`` was taken."""

    first: int
    up_to: int
    check: LastCheck
    subjects: list[str] | None = None
    witness: Witness | None = None


async def plan_snapshot(opts: Options) -> SnapshotPlan:
    """The bucket's sequences now (BucketNotFoundError, naming it, when it does not exist)."""
    async with opts.connection.session() as js:
        info = await bucket_info(js, opts.bucket)
        config, state = info.config, info.state
        check = LastCheck.for_stream(config.max_msgs_per_subject, config.allow_direct)
        up_to, subjects, witness = state.last_seq, None, None
        if check is LastCheck.KEYS and state.last_seq:
            # Pinned to the leader's newest message, which every partition's direct gets must
            # return too (a replica behind it would answer with older values, silently).
            stream = info.config.name
            witness = await newest_message(js, stream, f"{subject_prefix(opts.bucket)}>")
            if witness is None or not witness.literal:
                witness = None
                check = LastCheck.SUFFIX  # nothing to check replicas with: consumers
            else:
                up_to = witness.seq
                # Listed after up_to: a key with a message at or below it is still listed (its
                # subject goes only with its last message); keys newer than up_to read absent.
                subjects = await stream_subjects(js, stream, opts.subjects)
    return SnapshotPlan(max(state.first_seq, 1), up_to, check, subjects, witness)


async def _read_snapshot(
    opts: Options, projection: tuple[tuple[str, bool], ...], part: KVPartition
) -> list[tuple[Any, ...]]:
    if part.last < part.first or part.subjects == []:
        return []
    prefix = subject_prefix(opts.bucket)
    stage = encryption_stage(opts)
    stream = stream_name(opts.bucket)
    async with task_session(opts) as js:
        if part.subjects is not None and part.witness is not None:
            messages = await read_keys(js, stream, opts.subjects, part.subjects, part.witness)
        else:
            messages = await read_latest(
                js, stream, opts.subjects, part.first, part.last, part.up_to, part.check
            )
    return [
        row(message, prefix, projection, stage, opts.bucket, opts.key_codec)
        for message in messages
        if opts.include_deletes or op_from_headers(message.headers) is Op.PUT
    ]
