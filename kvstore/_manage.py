"""Creating, opening, updating, deleting and listing KV buckets."""

from __future__ import annotations

import dataclasses
import logging
from typing import Literal, TypedDict, Unpack

import msgspec

from jetstream import (
    AsyncListing,
    ClientValidationError,
    DurationValue,
    Feature,
    JetStream,
    Keyring,
    StreamExistsError,
    StreamInfo,
)
from jetstream._protocol.bucket_config import valid_bucket_names, validate_bucket_name

from ._bucket import Bucket
from ._codecs import KeyCodec
from ._encryption import EncryptionStage
from ._errors import BucketExistsError, BucketNotFoundError, missing_bucket
from ._models import (
    BucketConfig,
    bucket_config_from_stream,
    name_format_of,
    stream_config_for_bucket,
    stream_name,
    subject_prefix,
)

__all__ = [
    "BucketOptions",
    "bucket_info",
    "create_bucket",
    "delete_bucket",
    "list_buckets",
    "open_bucket",
    "update_bucket",
]

_log = logging.getLogger("kvstore")


class BucketOptions(TypedDict, total=False):
    """Keyword options of :func:`create_bucket` / :func:`update_bucket`: the fields of
    :class:`BucketConfig`."""

    history: int
    max_age: DurationValue | None
    marker_ttl: DurationValue | None
    max_value_size: int
    max_bytes: int
    storage: Literal["file", "memory"]
    replicas: int
    compression: bool
    description: str
    metadata: dict[str, str]


async def create_bucket(
    js: JetStream,
    bucket: str,
    config: BucketConfig | None = None,
    *,
    key_codec: KeyCodec | None = None,
    encryption: Keyring | None = None,
    allow_plaintext: bool = False,
    **options: Unpack[BucketOptions],
) -> Bucket:
    """Create a bucket (``KV_<bucket>`` stream) and return it.

    Give a :class:`BucketConfig` or its fields as keywords (``history=5,
    marker_ttl=timedelta(seconds=30)``). The stream gets per-message TTL, and atomic batches
    when the server supports them (API level >= 2). Creating a bucket again with the same
    configuration returns it (also one made before key-name formats were recorded, which
    keeps its format). ``key_codec`` (e.g. :class:`Base64KeyCodec`) maps the keys you
    use to the keys stored (see :func:`open_bucket`); ``encryption`` and
    ``allow_plaintext`` as in :func:`open_bucket`. The stream's metadata records the format
    :class:`EncryptedKeyCodec` stores names in here (v2: bound to this bucket).

    Raises:
        InvalidBucketNameError, InvalidBucketConfigError: bad input; nothing is sent.
        ClientValidationError: ``key_codec`` is not a :class:`KeyCodec`, or ``encryption``
            not a :class:`jetstream.Keyring`; nothing is sent.
        UnsupportedServerFeatureError: the server lacks per-message TTL (API level < 1).
        BucketExistsError: a bucket of that name exists with another configuration.
        JetStreamError: (``EncryptedKeyCodec``) the bucket records a key-name format this
            version does not know.
    """
    validate_bucket_name(bucket)
    _check_codec(key_codec)
    stage = _stage(encryption, allow_plaintext)
    config = _merge(config or BucketConfig(), options)
    await js.require(Feature.MESSAGE_TTL)
    atomic = await js.supports(Feature.ATOMIC_BATCH)
    stream_config = stream_config_for_bucket(bucket, config, allow_atomic=atomic)
    try:
        info = await js.add_stream(stream_config)
    except StreamExistsError as exc:
        # The same bucket made before the key-name format was recorded differs by that
        # record alone: the server, which compares configurations, tells if it is that one.
        unrecorded = stream_config_for_bucket(bucket, config, allow_atomic=atomic, name_format=None)
        try:
            info = await js.add_stream(unrecorded)
        except StreamExistsError:
            raise BucketExistsError(
                f"bucket {bucket!r} exists with another configuration",
                code=exc.code,
                err_code=exc.err_code,
            ) from exc
    return _bound(js, bucket, info, key_codec, stage)


async def open_bucket(
    js: JetStream,
    bucket: str,
    *,
    key_codec: KeyCodec | None = None,
    encryption: Keyring | None = None,
    allow_plaintext: bool = False,
) -> Bucket:
    """Bind to an existing bucket (created by us or any NATS client).

    With ``key_codec`` every key and key filter the bucket is given goes through the codec
    (``Base64KeyCodec()`` lets any text be a key, ``PathKeyCodec()`` takes ``/a/b`` paths), and
    entries, snapshots and ``keys()`` give the keys back decoded; the stored keys are the ones
    orbit.go ``kvcodec`` stores for the same codec. Keys in the bucket the codec cannot decode
    (written without it) are left out of ``keys()`` and watches, with a warning in the log.
    An :class:`EncryptedKeyCodec` is bound to this bucket in the key-name format its stream
    records (v1 when it records none: a bucket made earlier or by another client).

    With ``encryption`` (a :class:`jetstream.Keyring`) every value is encrypted on the client
    with the ring's primary key (AES-256-GCM, bound to the bucket and key) and values sealed
    with any key of the ring are decrypted; tombstones and markers stay plain. A stored value
    that is not encrypted raises :class:`jetstream.PlaintextValueError` on read unless
    ``allow_plaintext`` (migrating a plain bucket; :meth:`Bucket.rekey` then encrypts it).
    See docs/CODECS.md, "Encryption".

    Raises:
        InvalidBucketNameError: bad name; nothing is sent.
        ClientValidationError: ``key_codec`` is not a :class:`KeyCodec`, or ``encryption``
            not a :class:`jetstream.Keyring`; nothing is sent.
        BucketNotFoundError: no such bucket (also a stream ``KV_<bucket>`` that is not one:
            it does not take the bucket's subjects).
        JetStreamError: (``EncryptedKeyCodec``) the bucket records a key-name format this
            version does not know.
    """
    _check_codec(key_codec)
    stage = _stage(encryption, allow_plaintext)
    info = await bucket_info(js, bucket)
    return _bound(js, bucket, info, key_codec, stage)


async def update_bucket(
    js: JetStream,
    bucket: str,
    config: BucketConfig | None = None,
    **options: Unpack[BucketOptions],
) -> Bucket:
    """Change a bucket's configuration; fields not given keep their current value.

    Settings we do not model (placement, republish, sources) are preserved.

    Raises:
        InvalidBucketNameError, InvalidBucketConfigError: bad input; nothing is sent.
        BucketNotFoundError: no such bucket.
        InvalidStreamConfigError: the server refused the change (e.g. storage type).
    """
    current = await bucket_info(js, bucket)
    merged = _merge(config or bucket_config_from_stream(current.config), options)
    atomic = current.config.allow_atomic or await js.supports(Feature.ATOMIC_BATCH)
    ours = stream_config_for_bucket(
        bucket, merged, allow_atomic=atomic, name_format=name_format_of(current.config)
    )
    ours_fields = {f: getattr(ours, f) for f in _BUCKET_STREAM_FIELDS}
    updated = msgspec.structs.replace(current.config, **ours_fields)
    updated = msgspec.structs.replace(updated, metadata=ours.metadata)
    async with missing_bucket(js, bucket):  # deleted since it was read
        info = await js.update_stream(updated)
    return _bound(js, bucket, info)


_BUCKET_STREAM_FIELDS = (
    "description",
    "max_msgs_per_subject",
    "max_bytes",
    "max_age",
    "max_msg_size",
    "storage",
    "num_replicas",
    "duplicate_window",
    "compression",
    "allow_msg_ttl",
    "subject_delete_marker_ttl",
    "allow_atomic",
    "allow_direct",
)


async def delete_bucket(js: JetStream, bucket: str) -> None:
    """Delete a bucket and all its keys.

    Raises:
        InvalidBucketNameError: bad name; nothing is sent.
        BucketNotFoundError: no such bucket.
    """
    validate_bucket_name(bucket)
    async with missing_bucket(js, bucket):
        await js.delete_stream(stream_name(bucket))


def list_buckets(js: JetStream) -> AsyncListing[str]:
    """The names of all KV buckets of the account: ``async for`` or ``await`` (a list). A
    stream ``KV_<name>`` whose name is no valid bucket name (anyone may create one) is skipped
    with a warning in the log.

    Raises:
        JetStreamError: (iterating) the listing failed.
    """
    names = js.stream_names(subject="$KV.*.>")
    return AsyncListing(valid_bucket_names(names, "KV_", _log))


async def bucket_info(js: JetStream, bucket: str) -> StreamInfo:
    """The stream info of a bucket, checked to be a KV bucket.

    Raises:
        InvalidBucketNameError: bad name.
        BucketNotFoundError: no such stream, or a stream that is not a KV bucket (as nats.go
            says of it).
    """
    validate_bucket_name(bucket)
    async with missing_bucket(js, bucket):
        info = await js.stream_info(stream_name(bucket))
    expected_subject = f"{subject_prefix(bucket)}>"
    if expected_subject not in info.config.subjects and info.config.mirror is None:
        raise BucketNotFoundError(bucket, f"stream {info.config.name!r} is not a KV bucket")
    return info


def _bound(
    js: JetStream,
    bucket: str,
    info: StreamInfo,
    key_codec: KeyCodec | None = None,
    encryption: EncryptionStage | None = None,
) -> Bucket:
    config = bucket_config_from_stream(info.config)
    return Bucket(
        js,
        bucket,
        config,
        direct=info.config.allow_direct,
        key_codec=key_codec,
        encryption=encryption,
        name_format=name_format_of(info.config),
    )


def _stage(encryption: object, allow_plaintext: bool) -> EncryptionStage | None:
    if encryption is None:
        if allow_plaintext:
            raise ClientValidationError("allow_plaintext needs encryption= (a Keyring)")
        return None
    if not isinstance(encryption, Keyring):
        raise ClientValidationError(f"encryption must be a jetstream.Keyring, not {encryption!r}")
    return EncryptionStage(encryption, allow_plaintext=allow_plaintext)


def _check_codec(key_codec: object) -> None:
    if key_codec is not None and not isinstance(key_codec, KeyCodec):
        raise ClientValidationError(f"key_codec must be a kvstore.KeyCodec, not {key_codec!r}")


def _merge(config: BucketConfig, options: BucketOptions) -> BucketConfig:
    return dataclasses.replace(config, **options) if options else config  # type: ignore[arg-type]
