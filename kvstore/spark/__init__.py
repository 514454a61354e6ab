"""PySpark data source ``natskv``: write DataFrames into a KV bucket, read a bucket as a
DataFrame, stream its changes. Needs the ``spark`` extra (``pip install 'jetstore[spark]'``).

::

    import kvstore.spark
    kvstore.spark.register(spark)            # or rely on auto-registration (pyspark_natskv)

    (df.write.format("natskv").mode("append")
       .option("servers", "nats://127.0.0.1:4222").option("bucket", "profiles").save())
    spark.read.format("natskv").option("servers", url).load("profiles")
    spark.readStream.format("natskv").option("servers", url).option("bucket", "profiles").load()
    (df.writeStream.format("natskv").option("servers", url)
       .option("checkpointLocation", ckpt).start("profiles"))      # exactly once

**Write guarantee, honestly:** rows are written in atomic ``put_many`` batches of up to
``batchSize`` (default 1000) keys: each batch is stored whole or not at all. A job is
*at-least-once*, not atomic: a failed or retried task may already have stored some of its
batches (re-writing the same key and value is harmless), and ``abort`` cannot undo them. A
failed task names what it stored in its own error; ``abort`` logs what the successful tasks
stored and how many revisions the whole job (failed tasks included) added to the bucket. A null
value deletes the key.

**Streaming writes** store every input row as exactly one revision of its key, in input order
per key within a task, across failures and restarts from the checkpoint, however late the
replay: each atomic batch also advances a progress key of the bucket
(``_jetstore.sink.<queryId>.<partition>``, reserved) on the condition that nobody advanced it
since it was read, and a task skips the rows its key lists as stored. Options: the write
options, ``atomicity`` (``task``; ``microBatch``: the driver stores the whole micro-batch as
one atomic batch, or refuses it with ``BatchTooLargeError``) and ``onBadRow`` (``fail``;
``skip``: left out and logged without the value). A replay whose rows differ from those
stored raises ``SinkProgressError``. docs/SPARK.md states the guarantee and its limits.

A bucket that does not exist is ``BucketNotFoundError`` (naming it) for reads and writes alike,
raised at planning time. In a Python thread other than the session's, call ``register(spark)``
there first (Spark looks formats up in the thread's active session).

Options (strings; names are case-insensitive; an unknown option is refused with the list of
known ones): ``servers`` (comma-separated, default ``$NATS_URL``),
``user``/``password``/``token``/``creds``/``nkeySeedFile``/``tlsCa``, ``connectTimeout``
(seconds per attempt, 2) and ``connectAttempts`` (1), ``requestTimeout`` (seconds a request
waits for its reply, 5) and ``retryDeadline`` (seconds a request is tried again, 20, and a
batch's unanswered commit resolved, 30: the two bound a task's wait on a server that stopped
answering), ``bucket`` (or the ``load``/``save`` path). Write: ``keyColumn`` (``key``,
string), ``valueColumn`` (``value``, binary or string), ``ttlColumn`` (integer seconds or a
TTL string, optional), ``batchSize`` (1..1000); columns match case-insensitively, as
Spark's do, and their types are checked before the job starts.
Read: ``keys`` (comma-separated filters, default ``>``), ``numPartitions`` (2),
``includeDeletes`` (false). Stream: ``keys``, ``startingSequence`` (``earliest``, ``latest`` or a
revision), ``maxRecordsPerTrigger`` (rows per micro-batch: the changes that become rows, so
a filtered or history-1 bucket still gets full batches; a micro-batch never ends inside an
atomic batch such as a ``put_many``, it ends before one that would pass the limit or after
one larger than the limit alone), ``seqsPerPartition`` (10000), ``includeDeletes`` (true).
A checkpoint of a bucket since deleted and created again fails the query (its revisions
started over).

**Batch reads** are one snapshot: every partition reads the bucket as of the stream sequence
taken at planning (each key's last revision there; writes after planning never appear), and
each reads only its share, so more partitions (up to the cores) read faster. On a bucket with
history 1 the partitions read contiguous ranges of the stream's sequences; with more history
the keys are listed at planning (from the server's subject index, no values read) and
divided, and each partition reads its keys with batched direct gets. A key rewritten after
planning on a bucket that no longer keeps its planned revision (history 1, or more rewrites
than the history) is left out, as before.
Rows: ``key string, value binary, revision long, created timestamp, op string`` (``op`` is
``PUT``, ``DEL``, ``PURGE`` or ``EXPIRED``).

Key codecs (all modes): ``keyCodec`` (``base64``, ``path``, or ``path,base64``): keys are
written, read and filtered as a bucket opened with that codec sees them.

Encrypted buckets (all modes): ``keyFile`` names a key file (``jetstream.Keyring.from_file``,
see docs/CODECS.md; it must exist at that path on the driver and every executor: the keys are
never shipped with the job), ``allowPlaintext`` (false) reads plain values too. Written values
are encrypted, read values decrypted; a value that does not decrypt fails the task with
``DecryptionError``.
"""

from __future__ import annotations

from typing import Any

try:
    import pyarrow  # noqa: F401  (the spark extra: checked here, used by the writer)
    from pyspark.sql.datasource import DataSource
    from pyspark.sql.types import StructType
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra check
    raise ImportError(
        "kvstore.spark needs PySpark >= 4.2 and pyarrow: pip install 'jetstore[spark]'"
    ) from exc

from jetstream import ClientValidationError
from jetstream._errors import SparkWorkerPythonError
from jetstream._options import activate_spark_session, run_sync
from jetstream._spark_python import check_worker_python, prefer_driver_python

from ._options import parse_options
from ._progress import SinkProgressError
from ._read import KVPartition, KVReader, plan_snapshot
from ._rows import ROW_TYPE, SCHEMA, projection
from ._session import Offset
from ._sink import KVSinkCommit, KVStreamWriter
from ._stream import KVStreamReader, SeqRange
from ._write import KVArrowWriter, KVCommit, check_bucket, write_columns

__all__ = [
    "ROW_TYPE",
    "SCHEMA",
    "KVArrowWriter",
    "KVCommit",
    "KVDataSource",
    "KVPartition",
    "KVReader",
    "KVSinkCommit",
    "KVStreamReader",
    "KVStreamWriter",
    "Offset",
    "SeqRange",
    "SinkProgressError",
    "SparkWorkerPythonError",
    "register",
]

prefer_driver_python()  # before the session: its Python workers then run this interpreter


def register(spark: Any) -> None:
    """Register the ``natskv`` format with a SparkSession (idempotent), and make ``spark`` the
    calling thread's active session.

    Spark looks Python formats up in the *thread's active* session, which a new Python thread
    does not have (its JVM thread does not inherit it): there ``format("natskv")`` fails with
    DATA_SOURCE_NOT_FOUND even after a ``register`` in another thread, and even for formats
    found automatically. Call ``register(spark)`` in each thread that uses the format.

    Raises:
        SparkWorkerPythonError: ``spark`` is a local session whose Python workers run an
            interpreter that cannot import kvstore (the message names the fix).
    """
    check_worker_python(spark, "kvstore")
    spark.dataSource.register(KVDataSource)
    activate_spark_session(spark)


class KVDataSource(DataSource):
    """The ``natskv`` format (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return "natskv"

    def schema(self) -> str:
        return SCHEMA

    def writer(self, schema: StructType, overwrite: bool) -> KVArrowWriter:
        """Validate options, columns and the bucket at planning time.

        Raises:
            ClientValidationError: ``overwrite`` mode, bad or unknown options, or a bucket
                without atomic batches.
            ColumnError: a key/value/ttl column is missing or of a type that cannot be stored.
            BucketNotFoundError: no such bucket (names it).
            ConnectionFailedError: no server reachable.
        """
        if overwrite:
            raise ClientValidationError("natskv supports mode('append') only")
        opts = write_columns(parse_options(self.options, "write"), schema)
        start = run_sync(lambda: check_bucket(opts))  # fail at planning, before any task runs
        return KVArrowWriter(opts, start)

    def streamWriter(self, schema: StructType, overwrite: bool) -> KVStreamWriter:
        """Validate options, columns and the bucket at planning time (Spark also makes the
        writer again for each micro-batch's commit, on the driver).

        Raises:
            ClientValidationError: ``complete`` output mode, bad or unknown options, or a
                bucket without atomic batches.
            ColumnError: a key/value/ttl column is missing or of a type that cannot be stored.
            BucketNotFoundError: no such bucket (names it).
            ConnectionFailedError: no server reachable.
        """
        if overwrite:
            raise ClientValidationError(
                "natskv streams take outputMode('append') or ('update'): every row becomes "
                "a revision of its key; 'complete' would need the bucket emptied first"
            )
        opts = write_columns(parse_options(self.options, "streamWrite"), schema)
        run_sync(lambda: check_bucket(opts))  # fail at planning, before any task runs
        return KVStreamWriter(opts)

    def reader(self, schema: StructType) -> KVReader:
        """Validate options and pin the snapshot sequence at planning time.

        Raises:
            ClientValidationError, InvalidKeyError: bad or unknown options, filters or columns.
            BucketNotFoundError: no such bucket (names it).
            ConnectionFailedError: no server reachable.
        """
        opts = parse_options(self.options, "read")
        return KVReader(opts, projection(schema), run_sync(lambda: plan_snapshot(opts)))

    def streamReader(self, schema: StructType) -> KVStreamReader:
        """Raises: ClientValidationError, InvalidKeyError: bad options, filters or columns."""
        return KVStreamReader(parse_options(self.options, "stream"), projection(schema))
