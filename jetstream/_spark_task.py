"""Which rows a streaming sink's task writes, as Spark names them: the query (its id, kept in
the checkpoint), the micro-batch and the partition. A replayed micro-batch has the same ids,
which is what the exactly-once sinks (``natskv``, ``natsobj``) build on. Only ``*.spark``
modules import this one."""

from __future__ import annotations

import dataclasses

from ._errors import JetStreamError

__all__ = ["TaskId"]


@dataclasses.dataclass(frozen=True)
class TaskId:
    """Partition ``partition`` of micro-batch ``batch`` of the query ``query``."""

    query: str
    batch: int
    partition: int

    @classmethod
    def current(cls, fmt: str) -> TaskId:
        """The running Spark task's (Spark sets these for every task of a streaming query).

        Raises:
            JetStreamError: not inside a streaming query's task (``fmt`` names the sink).
        """
        from pyspark import TaskContext

        context = TaskContext.get()
        query = None if context is None else context.getLocalProperty("sql.streaming.queryId")
        batch = None if context is None else context.getLocalProperty("streaming.sql.batchId")
        if context is None or query is None or batch is None:
            raise JetStreamError(f"{fmt}: a stream writer runs only in a streaming query's tasks")
        return cls(query, int(batch), context.partitionId())
