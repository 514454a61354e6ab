"""kvstore: NATS KV buckets with per-key TTL, visible expiry and compare-and-set.

Buckets use the NATS KV layout (stream ``KV_<bucket>``, subjects ``$KV.<bucket>.<key>``,
``KV-Operation`` tombstones), so the ``nats`` CLI, nats.go and nats-py read and write them too::

    bucket = await kvstore.create_bucket(js, "profiles", history=5)
    rev = await bucket.put("alice.name", b"Alice", ttl="1h")
    entry = await bucket.get("alice.name")
"""

from jetstream import (
    BatchClosedError,
    BatchTooLargeError,
    CommitUnknownError,
    InvalidBucketConfigError,
    InvalidBucketNameError,
    InvalidTTLError,
    RekeyReport,
    ValueTooLargeError,
)
from jetstream._protocol.bucket_config import validate_bucket_name
from jetstream._public import show_as as _show_as

from ._batch import KeyBatch
from ._bucket import Bucket
from ._codecs import (
    Base64KeyCodec,
    ChainKeyCodec,
    FilterableKeyCodec,
    KeyCodec,
    NoOpKeyCodec,
    PathKeyCodec,
)
from ._election import Election
from ._errors import (
    BucketExistsError,
    BucketNotFoundError,
    FilterNotSupportedError,
    InvalidKeyError,
    KeyDecodeError,
    KeyExistsError,
    KeyNotFoundError,
    LeaseLostError,
    LockTimeoutError,
    ValueDecodeError,
    ValueEncodeError,
    WrongRevisionError,
)
from ._keys import validate_filter, validate_key
from ._lease import MIN_LEASE_TTL, Lease
from ._manage import (
    BucketOptions,
    create_bucket,
    delete_bucket,
    list_buckets,
    open_bucket,
    update_bucket,
)
from ._models import MAX_HISTORY, BucketConfig, BucketStatus, Entry, Op
from ._name_codec import EncryptedKeyCodec
from ._permissions import (
    prefix_writer_permissions,
    reader_permissions,
    writer_permissions,
)
from ._snapshot import Snapshot
from ._typed import TypedBucket, TypedEntry, TypedSnapshot, TypedWatcher, ValueFormat
from ._watch import KeyWatcher

__all__ = [
    "MAX_HISTORY",
    "MIN_LEASE_TTL",
    "Base64KeyCodec",
    "BatchClosedError",
    "BatchTooLargeError",
    "Bucket",
    "BucketConfig",
    "BucketExistsError",
    "BucketNotFoundError",
    "BucketOptions",
    "BucketStatus",
    "ChainKeyCodec",
    "CommitUnknownError",
    "Election",
    "EncryptedKeyCodec",
    "Entry",
    "FilterNotSupportedError",
    "FilterableKeyCodec",
    "InvalidBucketConfigError",
    "InvalidBucketNameError",
    "InvalidKeyError",
    "InvalidTTLError",
    "KeyBatch",
    "KeyCodec",
    "KeyDecodeError",
    "KeyExistsError",
    "KeyNotFoundError",
    "KeyWatcher",
    "Lease",
    "LeaseLostError",
    "LockTimeoutError",
    "NoOpKeyCodec",
    "Op",
    "PathKeyCodec",
    "RekeyReport",
    "Snapshot",
    "TypedBucket",
    "TypedEntry",
    "TypedSnapshot",
    "TypedWatcher",
    "ValueDecodeError",
    "ValueEncodeError",
    "ValueFormat",
    "ValueTooLargeError",
    "WrongRevisionError",
    "create_bucket",
    "delete_bucket",
    "list_buckets",
    "open_bucket",
    "prefix_writer_permissions",
    "reader_permissions",
    "update_bucket",
    "validate_bucket_name",
    "validate_filter",
    "validate_key",
    "writer_permissions",
]

_show_as(
    __name__,
    Base64KeyCodec,
    Bucket,
    BucketConfig,
    BucketStatus,
    ChainKeyCodec,
    Election,
    Entry,
    KeyBatch,
    KeyWatcher,
    Lease,
    NoOpKeyCodec,
    Op,
    PathKeyCodec,
    Snapshot,
    TypedBucket,
    TypedEntry,
    TypedSnapshot,
    TypedWatcher,
)
