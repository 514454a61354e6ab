"""PySpark data source ``natskv``: write DataFrames into a KV bucket, read a bucket as a
DataFrame, stream its changes. Needs the ``spark`` extra (``pip install 'jetstore[spark]'``).

::

    import kvstore.spark
    kvstore.spark.register(spark)            # or rely on auto-registration (pyspark_natskv)

    (df.write.format("natskv").mode("append")
       .option("servers", "nats://127.0.0.1:4222").option("bucket", "profiles").save())
    spark.read.format("natskv").option("servers", url).load("profiles")
    spark.readStream.format("natskv").option("servers", url).option("bucket", "profiles").load()

**Write guarantee, honestly:** rows are written in atomic ``put_many`` batches of up to
``batchSize`` (default 1000) keys: each batch is stored whole or not at all. A job is
*at-least-once*, not atomic: a failed or retried task may already have stored some of its
batches (re-writing the same key and value is harmless), and ``abort`` cannot undo them. A
failed task names what it stored in its own error; ``abort`` logs what the successful tasks
stored and how many revisions the whole job (failed tasks included) added to the bucket. A null
value deletes the key.

A bucket that does not exist is ``BucketNotFoundError`` (naming it) for reads and writes alike,
raised at planning time. In a Python thread other than the session's, call ``register(spark)``
there first (Spark looks formats up in the thread's active session).

Options (strings; names are case-insensitive; an unknown option is refused with the list of
known ones): ``servers`` (comma-separated, default ``$NATS_URL``),
``user``/``password``/``token``/``creds``/``nkeySeedFile``/``tlsCa``, ``connectTimeout``
(seconds per attempt, 2) and ``connectAttempts`` (1), ``bucket`` (or the ``load``/``save``
path). Write: ``keyColumn`` (``key``, string), ``valueColumn`` (``value``, binary or string),
``ttlColumn`` (integer seconds or a TTL string, optional), ``batchSize`` (1..1000); columns
match case-insensitively, as Spark's do, and their types are checked before the job starts.
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

Encrypted buckets (all modes): ``keyFile`` names a key file (``jetstream.Keyring.from_file``,
see docs/CODECS.md; it must exist at that path on the driver and every executor: the keys are
never shipped with the job), ``allowPlaintext`` (false) reads plain values too. Written values
are encrypted, read values decrypted; a value that does not decrypt fails the task with
``DecryptionError``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

try:
    import pyarrow as pa
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        DataSourceStreamReader,
        InputPartition,
        WriterCommitMessage,
    )
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
    from pyspark.sql.types import (
        BinaryType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra check
    raise ImportError(
        "kvstore.spark needs PySpark >= 4.2 and pyarrow: pip install 'jetstore[spark]'"
    ) from exc

from jetstream import (
    ClientValidationError,
    JetStream,
    JetStreamError,
    Keyring,
    OrderedConsumer,
    StoredMessage,
)
from jetstream._api.stream_subjects import stream_subjects
from jetstream._errors import ColumnError
from jetstream._options import (
    CONNECTION_OPTIONS,
    ConnectionOptions,
    activate_spark_session,
    bool_option,
    check_options,
    int_option,
    named_option,
    read_columns,
    run_sync,
    str_option,
)
from jetstream._protocol.bucket_config import validate_bucket_name

from ._encryption import EncryptionStage
from ._errors import BucketNotFoundError
from ._keys import distinct_filters, validate_filter
from ._manage import bucket_info, open_bucket
from ._missing import missing_bucket
from ._models import Op, op_from_headers, stream_name, subject_prefix
from ._ranges import (
    LastCheck,
    count_end,
    read_keys,
    read_latest,
    split_range,
    split_subjects,
)
from ._snapshot import Witness, newest_message
from ._stages import ValueContext

__all__ = ["KVCommit", "KVDataSource", "register"]

_log = logging.getLogger("kvstore.spark")
ROW_TYPE = StructType(
    [
        StructField("key", StringType()),
        StructField("value", BinaryType()),
        StructField("revision", LongType()),
        StructField("created", TimestampType()),
        StructField("op", StringType()),
    ]
)
"""The rows of a ``natskv`` read, for a reader built without a session (``reader(ROW_TYPE)``)."""
SCHEMA = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in ROW_TYPE.fields)
_COMMON = (*CONNECTION_OPTIONS, "bucket", "path", "keyFile", "allowPlaintext")
_KNOWN = {
    "write": (*_COMMON, "keyColumn", "valueColumn", "ttlColumn", "batchSize"),
    "read": (*_COMMON, "keys", "numPartitions", "includeDeletes"),
    "stream": (
        *_COMMON,
        "keys",
        "startingSequence",
        "maxRecordsPerTrigger",
        "seqsPerPartition",
        "includeDeletes",
    ),
}


def register(spark: Any) -> None:
    """Register the ``natskv`` format with a SparkSession (idempotent), and make ``spark`` the
    calling thread's active session.

    Spark looks Python formats up in the *thread's active* session, which a new Python thread
    does not have (its JVM thread does not inherit it): there ``format("natskv")`` fails with
    DATA_SOURCE_NOT_FOUND even after a ``register`` in another thread, and even for formats
    found automatically. Call ``register(spark)`` in each thread that uses the format.
    """
    spark.dataSource.register(KVDataSource)
    activate_spark_session(spark)


# -- options ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Options:
    connection: ConnectionOptions
    bucket: str
    key_column: str
    value_column: str
    ttl_column: str | None
    batch_size: int
    filters: tuple[str, ...]
    partitions: int
    include_deletes: bool
    start: str
    max_records: int | None
    seqs_per_partition: int
    key_file: str | None = None
    allow_plaintext: bool = False

    @property
    def subjects(self) -> list[str]:
        return [subject_prefix(self.bucket) + f for f in self.filters]


def _options(options: Mapping[str, str], mode: str) -> _Options:
    """Parse the options of one mode (``write``, ``read``, ``stream``), refusing the others."""
    check_options(options, _KNOWN[mode], f"natskv {mode}")
    stream = mode == "stream"
    bucket = named_option(options, "bucket")
    validate_bucket_name(bucket)
    patterns = [f.strip() for f in (str_option(options, "keys", ">") or ">").split(",")]
    for pattern in patterns:
        validate_filter(pattern)
    filters = tuple(distinct_filters(patterns))  # the server refuses overlapping filters
    max_records = str_option(options, "maxRecordsPerTrigger")
    key_file = str_option(options, "keyFile")
    allow_plaintext = bool_option(options, "allowPlaintext", False)
    if key_file is not None:
        Keyring.from_file(key_file)  # a bad key file fails at planning, not in the tasks
    elif allow_plaintext:
        raise ClientValidationError("option 'allowPlaintext' needs 'keyFile'")
    return _Options(
        connection=ConnectionOptions.from_strings(options),
        bucket=bucket,
        key_column=str_option(options, "keyColumn", "key") or "key",
        value_column=str_option(options, "valueColumn", "value") or "value",
        ttl_column=str_option(options, "ttlColumn"),
        batch_size=int_option(options, "batchSize", 1000, low=1, high=1000),
        filters=filters,
        partitions=int_option(options, "numPartitions", 2, low=1, high=1024),
        include_deletes=bool_option(options, "includeDeletes", stream),
        start=(str_option(options, "startingSequence", "earliest") or "earliest").lower(),
        max_records=None
        if max_records is None
        else int_option(options, "maxRecordsPerTrigger", 0, low=1),
        seqs_per_partition=int_option(options, "seqsPerPartition", 10_000, low=1),
        key_file=key_file,
        allow_plaintext=allow_plaintext,
    )


def _stage(opts: _Options) -> EncryptionStage | None:
    """The encryption of a task: its keys read from the key file where the task runs."""
    if opts.key_file is None:
        return None
    keyring = Keyring.from_file(opts.key_file)
    return EncryptionStage(keyring, allow_plaintext=opts.allow_plaintext)


@contextlib.asynccontextmanager
async def _task_session(opts: _Options) -> AsyncIterator[JetStream]:
    """A task's connection. A bucket deleted after planning is BucketNotFoundError naming it,
    as at planning, whatever the task's reads got ("stream not found", or "no responders"
    for a batched direct get)."""
    async with opts.connection.session() as js, missing_bucket(js, opts.bucket):
        yield js


async def _last_seq(opts: _Options) -> int:
    """The bucket's last revision (BucketNotFoundError, naming it, when it does not exist)."""
    return int((await _stream_end(opts))["seq"])


async def _stream_end(opts: _Options) -> Offset:
    """The offset of the bucket's last revision, with the stream's creation time: a bucket
    deleted and created again starts its revisions over, and an offset of the old one must
    not be read as a point in the new one (BucketNotFoundError when it does not exist)."""
    async with opts.connection.session() as js:
        info = await bucket_info(js, opts.bucket)
    created = info.created.isoformat() if info.created is not None else ""
    return {"seq": info.state.last_seq, "created": created}


async def _first_seq(opts: _Options) -> int:
    """The sequence of the bucket's oldest message still stored."""
    async with opts.connection.session() as js:
        return (await bucket_info(js, opts.bucket)).state.first_seq


# -- the data source ----------------------------------------------------------------------------


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
        opts = _columns(_options(self.options, "write"), schema)
        start = run_sync(lambda: _check_bucket(opts))  # fail at planning, before any task runs
        return KVArrowWriter(opts, start)

    def reader(self, schema: StructType) -> KVReader:
        """Validate options and pin the snapshot sequence at planning time.

        Raises:
            ClientValidationError, InvalidKeyError: bad or unknown options, filters or columns.
            BucketNotFoundError: no such bucket (names it).
            ConnectionFailedError: no server reachable.
        """
        opts = _options(self.options, "read")
        return KVReader(opts, _projection(schema), run_sync(lambda: _plan(opts)))

    def streamReader(self, schema: StructType) -> KVStreamReader:
        """Raises: ClientValidationError, InvalidKeyError: bad options, filters or columns."""
        return KVStreamReader(_options(self.options, "stream"), _projection(schema))


# Arrow-side type names Spark columns may have: what each written column accepts.
_KEY_TYPES = ("string",)
_VALUE_TYPES = ("binary", "string")
_TTL_TYPES = ("byte", "short", "integer", "long", "string", "void")


def _columns(opts: _Options, schema: StructType) -> _Options:
    """Resolve the key/value/ttl columns case-insensitively (as Spark does) to the DataFrame's
    own spelling and check their types, so a wrong column fails on the driver, not in tasks."""
    fields = {field.name.lower(): field for field in schema.fields}

    def resolve(option: str, column: str, types: tuple[str, ...]) -> str:
        field = fields.get(column.lower())
        if field is None:
            raise ColumnError(
                f"natskv: column {column!r} ({option}) is not in the DataFrame: "
                f"{schema.fieldNames()}"
            )
        type_name = field.dataType.typeName()
        if type_name not in types:
            raise ColumnError(
                f"natskv: column {field.name!r} ({option}) has type {field.dataType.simpleString()}"
                f"; it must be one of {', '.join(types)}"
            )
        return str(field.name)

    ttl = opts.ttl_column
    return dataclasses.replace(
        opts,
        key_column=resolve("keyColumn", opts.key_column, _KEY_TYPES),
        value_column=resolve("valueColumn", opts.value_column, _VALUE_TYPES),
        ttl_column=None if ttl is None else resolve("ttlColumn", ttl, _TTL_TYPES),
    )


async def _check_bucket(opts: _Options) -> int:
    """Check the bucket takes atomic batches; its last revision (what the job starts from)."""
    async with opts.connection.session() as js:
        info = await bucket_info(js, opts.bucket)
        if not info.config.allow_atomic:
            raise ClientValidationError(
                f"bucket {opts.bucket!r} has no atomic batches (allow_atomic); "
                "update it with kvstore.update_bucket"
            )
        return info.state.last_seq


def _projection(schema: StructType) -> tuple[tuple[str, bool], ...]:
    """(field, as_text) for each requested column: a user schema may pick, reorder, and read
    ``value`` as a string (decoded as UTF-8).

    Raises:
        ColumnError: a column natskv does not have, or of a type it cannot give (a
            ``value int`` failed every task in pyarrow's conversion).
    """
    columns = read_columns(schema, _READ_TYPES, "natskv")
    return tuple((name, name == "value" and kind == "string") for name, kind in columns)


_READ_TYPES = {field.name: (field.dataType.typeName(),) for field in ROW_TYPE.fields} | {
    "value": ("binary", "string"),
    "revision": ("long", "integer", "double"),  # what Spark converts a revision to
}


def _row(
    message: StoredMessage,
    prefix: str,
    projection: tuple[tuple[str, bool], ...],
    stage: EncryptionStage | None = None,
    bucket: str = "",
) -> tuple[Any, ...]:
    key = message.subject[len(prefix) :]
    op = op_from_headers(message.headers)
    value = message.data if op is Op.PUT else b""  # as Entry: tombstones have no value
    if stage is not None and op is Op.PUT and any(name == "value" for name, _ in projection):
        context = ValueContext(bucket, key, message.headers, message.seq)
        value = stage.open(value, context)  # DecryptionError fails the task
    values: dict[str, Any] = {
        "key": key,
        "value": value,
        "revision": message.seq,
        "created": message.time,
        "op": op.value,
    }
    return tuple(
        values[name].decode("utf-8", "replace") if as_text else values[name]
        for name, as_text in projection
    )


# -- writing ------------------------------------------------------------------------------------


@dataclasses.dataclass
class KVCommit(WriterCommitMessage):
    """What one partition stored: its keys, atomic batches and revision range."""

    keys: int = 0
    batches: int = 0
    first_revision: int = 0
    last_revision: int = 0


class KVArrowWriter(DataSourceArrowWriter):
    """Writes each partition in atomic batches (one connection and event loop per task).
    ``start`` is the bucket's last revision when the job was planned."""

    def __init__(self, opts: _Options, start: int = 0) -> None:
        self.opts = opts
        self.start = start

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KVCommit:
        return run_sync(lambda: _write_partition(self.opts, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log.info("natskv write committed: %s", _summary(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Log what the job stored, failed tasks included: Spark hands ``abort`` only the
        successful tasks' messages (None for a failed one), so the failed tasks' part is
        measured on the bucket (its revisions since planning) and each failed task also
        names its own count in its error."""
        _log.warning(
            "natskv write to bucket %r aborted; nothing can be rolled back, every batch is "
            "stored whole. Successful tasks stored %s. %s",
            self.opts.bucket,
            _summary(messages),
            _growth(self.opts, self.start),
        )


def _summary(messages: Sequence[WriterCommitMessage | None]) -> str:
    done = [m for m in messages if isinstance(m, KVCommit)]
    keys = sum(m.keys for m in done)
    batches = sum(m.batches for m in done)
    failed = len(messages) - len(done)
    return (
        f"{keys} keys in {batches} batches ({len(done)} of {len(messages)} tasks succeeded"
        f"{f', {failed} failed' if failed else ''})"
    )


def _growth(opts: _Options, start: int) -> str:
    """What the whole job stored (failed tasks included), read from the bucket itself."""
    try:
        last = run_sync(lambda: _last_seq(opts))
    except JetStreamError as exc:
        return f"What failed tasks stored could not be measured ({type(exc).__name__}: {exc})."
    if last <= start:
        return "The bucket has no revision newer than the job's start: failed tasks stored none."
    return (
        f"All tasks, failed ones included, stored at most {last - start} revisions "
        f"({start + 1}..{last}; other writers' revisions would count too)."
    )


async def _write_partition(opts: _Options, batches: Iterator[pa.RecordBatch]) -> KVCommit:
    result = KVCommit()
    try:
        async with opts.connection.session() as js:
            bucket = await open_bucket(
                js,
                opts.bucket,
                encryption=None if opts.key_file is None else Keyring.from_file(opts.key_file),
                allow_plaintext=opts.allow_plaintext,
            )
            group: dict[str, tuple[bytes | None, Any]] = {}
            for record_batch in batches:
                for key, value, ttl in _rows(record_batch, opts):
                    if key in group or len(group) >= opts.batch_size:  # a key once per batch
                        await _store(bucket, group, result)
                        group = {}
                    group[key] = (value, ttl)
            if group:
                await _store(bucket, group, result)
    except Exception as exc:
        # abort() never sees a failed task's commit message: say here what stays stored.
        stored = (
            f"natskv: this task stored {result.keys} keys in {result.batches} atomic batches "
            f"(revisions {result.first_revision}..{result.last_revision}) before it failed; "
            "they stay stored"
            if result.batches
            else "natskv: this task stored nothing before it failed"
        )
        _log.error("%s: %s: %s", stored, type(exc).__name__, exc)
        exc.add_note(stored)
        raise
    return result


def _rows(batch: pa.RecordBatch, opts: _Options) -> Iterator[tuple[str, bytes | None, Any]]:
    keys = batch.column(opts.key_column).to_pylist()
    values = batch.column(opts.value_column).to_pylist()
    ttls = batch.column(opts.ttl_column).to_pylist() if opts.ttl_column else [None] * len(keys)
    for key, value, ttl in zip(keys, values, ttls, strict=True):
        if not isinstance(key, str):
            raise ClientValidationError(f"keys must be strings, got {key!r}")
        yield key, value.encode() if isinstance(value, str) else value, ttl


async def _store(bucket: Any, group: dict[str, tuple[bytes | None, Any]], result: KVCommit) -> None:
    async with bucket.batch(max_keys=len(group)) as batch:
        for key, (value, ttl) in group.items():
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value, ttl=ttl)
    revisions = list(batch.revisions.values())
    result.keys += len(revisions)
    result.batches += 1
    result.first_revision = result.first_revision or min(revisions)
    result.last_revision = max(result.last_revision, max(revisions))


# -- batch reading ------------------------------------------------------------------------------


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
        self, opts: _Options, projection: tuple[tuple[str, bool], ...], plan: _Plan
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
class _Plan:
    """What a snapshot read pins at planning: its sequences, how a partition tells a key's
    last revision, and (``KEYS``) the keys' subjects, listed after ``up_to`` was taken."""

    first: int
    up_to: int
    check: LastCheck
    subjects: list[str] | None = None
    witness: Witness | None = None


async def _plan(opts: _Options) -> _Plan:
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
    return _Plan(max(state.first_seq, 1), up_to, check, subjects, witness)


async def _read_snapshot(
    opts: _Options, projection: tuple[tuple[str, bool], ...], part: KVPartition
) -> list[tuple[Any, ...]]:
    if part.last < part.first or part.subjects == []:
        return []
    prefix = subject_prefix(opts.bucket)
    stage = _stage(opts)
    stream = stream_name(opts.bucket)
    async with _task_session(opts) as js:
        if part.subjects is not None and part.witness is not None:
            messages = await read_keys(js, stream, opts.subjects, part.subjects, part.witness)
        else:
            messages = await read_latest(
                js, stream, opts.subjects, part.first, part.last, part.up_to, part.check
            )
    return [
        _row(message, prefix, projection, stage, opts.bucket)
        for message in messages
        if opts.include_deletes or op_from_headers(message.headers) is Op.PUT
    ]


# -- streaming ----------------------------------------------------------------------------------


@dataclasses.dataclass
class SeqRange(InputPartition):
    """Stream sequences ``first`` .. ``last`` (inclusive)."""

    first: int
    last: int


class KVStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Key changes as a stream; offsets are ``{"seq": N, "created": T}``: the last revision
    included, and when the bucket's stream was created (checkpoints written before it was
    recorded hold ``{"seq": N}`` alone, and are resumed unchecked)."""

    def __init__(self, opts: _Options, projection: tuple[tuple[str, bool], ...]) -> None:
        self.opts = opts
        self.projection = projection
        self._target: Offset | None = None

    def initialOffset(self) -> Offset:
        start = self.opts.start
        if start not in ("earliest", "latest") and not start.isdigit():
            raise ClientValidationError(
                f"startingSequence must be earliest, latest or a revision: {start!r}"
            )
        end = run_sync(lambda: _stream_end(self.opts))
        if start == "latest":
            return end
        return {**end, "seq": 0 if start == "earliest" else max(0, int(start) - 1)}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_records:
            return ReadMaxRows(self.opts.max_records)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = run_sync(lambda: _stream_end(self.opts))

    def latestOffset(self, start: Offset | None = None, limit: ReadLimit | None = None) -> Offset:
        """The offset the next micro-batch ends at.

        Raises:
            BucketNotFoundError: the bucket does not exist, or was deleted and created again
                since ``start`` (the checkpoint's bucket is gone; its revisions start over).
        """
        end = self._target if self._target is not None else run_sync(lambda: _stream_end(self.opts))
        if start is not None:
            _check_same_bucket(self.opts.bucket, start, end)
        if start is not None and isinstance(limit, ReadMaxRows):
            after, latest, rows = int(start["seq"]), int(end["seq"]), limit.max_rows
            end = {**end, "seq": run_sync(lambda: _rows_end(self.opts, after, latest, rows))}
        return end

    def partitions(self, start: Offset, end: Offset) -> list[SeqRange]:
        step = self.opts.seqs_per_partition
        first, last = int(start["seq"]) + 1, int(end["seq"])
        if last - first >= step:  # several partitions: none for sequences the stream dropped
            first = max(first, run_sync(lambda: _first_seq(self.opts)))
        return [SeqRange(s, min(s + step - 1, last)) for s in range(first, last + 1, step)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, SeqRange)
        yield from run_sync(lambda: _read_range(self.opts, self.projection, partition))

    def commit(self, end: Offset) -> None:
        """Nothing to do: offsets are stream sequences, no server-side state is kept."""


Offset = dict[str, int | str]
"""A stream offset as Spark checkpoints it (JSON)."""


def _check_same_bucket(bucket: str, start: Offset, end: Offset) -> None:
    """Raises BucketNotFoundError: ``start`` was taken on an earlier bucket of the same name.

    Resuming there would read the new bucket from the old one's revision on, silently
    skipping its first changes (as Spark's Kafka source fails on data loss, so does this)."""
    before = start.get("created")
    if before and end.get("created") and before != end["created"]:
        raise BucketNotFoundError(
            bucket,
            f"bucket {bucket!r} was deleted and created again since this query's checkpoint "
            f"(created {before}, now {end['created']}): its revisions started over; start the "
            "query with a new checkpoint location to read the new bucket",
        )


async def _rows_end(opts: _Options, after: int, latest: int, rows: int) -> int:
    """Where a micro-batch of at most ``rows`` rows starting after ``after`` ends: rows are
    counted (the messages matching the key filters, deletes and markers only when they are
    rows), not stream sequences, so a filtered or history-1 bucket still gets full batches."""

    def counts(headers: dict[str, str]) -> bool:
        return opts.include_deletes or op_from_headers(headers) is Op.PUT

    async with opts.connection.session() as js:
        stream = stream_name(opts.bucket)
        return await count_end(js, stream, opts.subjects, after, latest, rows, counts)


async def _read_range(
    opts: _Options, projection: tuple[tuple[str, bool], ...], part: SeqRange
) -> list[tuple[Any, ...]]:
    prefix = subject_prefix(opts.bucket)
    stage = _stage(opts)
    rows = []
    async with (
        _task_session(opts) as js,
        OrderedConsumer(
            js,
            stream_name(opts.bucket),
            filter_subjects=opts.subjects,
            opt_start_seq=part.first,
            until_caught_up=True,
        ) as consumer,
    ):
        async for message in consumer:
            meta = message.metadata
            if meta.stream_seq > part.last:
                break
            if opts.include_deletes or op_from_headers(message.headers) is Op.PUT:
                stored = StoredMessage(
                    subject=message.subject,
                    seq=meta.stream_seq,
                    time=meta.time,
                    headers=message.headers,
                    data=message.data,
                )
                rows.append(_row(stored, prefix, projection, stage, opts.bucket))
    return rows
