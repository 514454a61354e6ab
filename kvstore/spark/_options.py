"""The ``natskv`` options: parsed and checked on the driver, for each mode (write, read,
stream), before any task runs; and the encryption a task builds from them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from jetstream import ClientValidationError, Keyring
from jetstream._options import (
    CONNECTION_OPTIONS,
    ConnectionOptions,
    bool_option,
    check_options,
    int_option,
    named_option,
    str_option,
)
from jetstream._protocol.bucket_config import validate_bucket_name

from .._codecs import (
    Base64KeyCodec,
    ChainKeyCodec,
    KeyCodec,
    PathKeyCodec,
    encode_filter,
)
from .._encryption import EncryptionStage
from .._keys import distinct_filters, validate_filter
from .._models import subject_prefix

__all__ = ["Options", "encryption_stage", "parse_options"]

_COMMON = (*CONNECTION_OPTIONS, "bucket", "path", "keyFile", "allowPlaintext", "keyCodec")
_WRITE = (*_COMMON, "keyColumn", "valueColumn", "ttlColumn", "batchSize")
_ATOMICITY = ("task", "microBatch")
_KEY_CODECS: dict[str, Callable[[], KeyCodec]] = {"base64": Base64KeyCodec, "path": PathKeyCodec}
_ON_BAD_ROW = ("fail", "skip")
_KNOWN = {
    "write": (*_WRITE,),
    # checkpointLocation is Spark's own (it hands the sink every writeStream option).
    "streamWrite": (*_WRITE, "atomicity", "onBadRow", "checkpointLocation"),
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


@dataclasses.dataclass(frozen=True)
class Options:
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
    atomicity: str = "task"
    """Stream writes: ``task`` (each task's rows in atomic batches) or ``microBatch``."""
    on_bad_row: str = "fail"
    """Stream writes: ``fail`` the micro-batch on a bad row, or ``skip`` it (logged)."""
    key_codecs: tuple[str, ...] = ()
    """``keyCodec``: the codecs keys go through (in order; names, so the options pickle)."""

    @property
    def path_keys(self) -> bool:
        """Keys are paths first (``keyCodec=path``...): the writer's progress keys too."""
        return self.key_codecs[:1] == ("path",)

    @property
    def key_codec(self) -> KeyCodec | None:
        """The key codec of ``keyCodec`` (None: keys are stored as given)."""
        return _codec(self.key_codecs)

    @property
    def subjects(self) -> list[str]:
        return [subject_prefix(self.bucket) + f for f in self.filters]


def parse_options(options: Mapping[str, str], mode: str) -> Options:
    """Parse the options of one mode (``write``, ``streamWrite``, ``read``, ``stream``),
    refusing the others.

    Raises:
        ClientValidationError, InvalidKeyError, InvalidKeyringError: an unknown option, or a
            value out of range (the message names the option).
    """
    check_options(options, _KNOWN[mode], f"natskv {mode}")
    stream = mode == "stream"
    bucket = named_option(options, "bucket")
    validate_bucket_name(bucket)
    patterns = [f.strip() for f in (str_option(options, "keys", ">") or ">").split(",")]
    key_codecs = _key_codecs(options)
    codec = _codec(key_codecs)
    if codec is not None:  # filters are given as keys are: encoded as the codec stores them
        patterns = [encode_filter(codec, pattern) for pattern in patterns]
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
    return Options(
        connection=ConnectionOptions.from_strings(options),
        bucket=bucket,
        key_column=str_option(options, "keyColumn", "key") or "key",
        value_column=str_option(options, "valueColumn", "value") or "value",
        ttl_column=str_option(options, "ttlColumn"),
        # A streaming write's batches also carry its progress key: room for one row at least.
        batch_size=int_option(
            options, "batchSize", 1000, low=2 if mode == "streamWrite" else 1, high=1000
        ),
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
        atomicity=_choice(options, "atomicity", _ATOMICITY),
        on_bad_row=_choice(options, "onBadRow", _ON_BAD_ROW),
        key_codecs=key_codecs,
    )


def _codec(names: tuple[str, ...]) -> KeyCodec | None:
    codecs = [_KEY_CODECS[name]() for name in names]
    if len(codecs) > 1:
        return ChainKeyCodec(*codecs)
    return codecs[0] if codecs else None


def _key_codecs(options: Mapping[str, str]) -> tuple[str, ...]:
    """The ``keyCodec`` names: ``base64``, ``path``, or several, comma-separated, applied in
    order (``path,base64``).

    Raises:
        ClientValidationError: another name (the message lists the known ones).
    """
    text = str_option(options, "keyCodec", "") or ""
    names = tuple(name.strip().lower() for name in text.split(",") if name.strip())
    for name in names:
        if name not in _KEY_CODECS:
            raise ClientValidationError(
                f"option 'keyCodec' takes {', '.join(_KEY_CODECS)} (comma-separated to chain "
                f"them): {text!r}"
            )
    return names


def _choice(options: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (matched case-insensitively; the first is the default).

    Raises:
        ClientValidationError: another value (the message lists the choices).
    """
    text = str_option(options, name, choices[0]) or choices[0]
    for choice in choices:
        if text.lower() == choice.lower():
            return choice
    raise ClientValidationError(f"option {name!r} must be one of {', '.join(choices)}: {text!r}")


def encryption_stage(opts: Options) -> EncryptionStage | None:
    """The encryption of a task: its keys read from the key file where the task runs."""
    if opts.key_file is None:
        return None
    keyring = Keyring.from_file(opts.key_file)
    return EncryptionStage(keyring, allow_plaintext=opts.allow_plaintext)
