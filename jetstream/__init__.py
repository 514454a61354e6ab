"""jetstream: the JetStream protocol layer of jetstore, on nats-py's core client.

It is the only package that knows subjects, headers and the JSON API. ``kvstore`` and
``objstore`` are built on its public names::

    async with jetstream.EmbeddedServer() as server:
        async with await jetstream.connect(server.url) as js:
            info = await js.account_info()
"""

from . import headers
from ._api.stream_subjects import stream_subjects
from ._connect import connect
from ._consume.consumer import Consumer
from ._consume.message_stream import MessageStream
from ._consume.ordered import OrderedConsumer
from ._consume.pull_message import PullMessage
from ._consume.scan import scan_stream
from ._context import DEFAULT_TIMEOUT, Feature, JetStream
from ._crypto.keyring import Keyring, RekeyReport
from ._embedded.cluster import EmbeddedCluster
from ._embedded.server import EmbeddedServer, find_server_binary
from ._errors import (
    AuthenticationError,
    BatchAbandonedError,
    BatchClosedError,
    BatchProtocolError,
    BatchPublishDisabledError,
    BatchTooLargeError,
    BatchUnsupportedHeaderError,
    ClientValidationError,
    ColumnError,
    CommitUnknownError,
    ConnectionClosedError,
    ConnectionFailedError,
    ConsumerDeletedError,
    ConsumerExistsError,
    ConsumerNotFoundError,
    ConsumerStuckError,
    DecryptionError,
    DisconnectedError,
    DuplicateMessageIdError,
    FastBatchError,
    HeartbeatMissedError,
    InvalidBucketConfigError,
    InvalidBucketNameError,
    InvalidHeaderError,
    InvalidKeyringError,
    InvalidNameError,
    InvalidStreamConfigError,
    InvalidTTLError,
    JetStreamError,
    MessageIdInProcessError,
    MessageNotFoundError,
    MessageTooLargeError,
    MessageTooLargeForPullError,
    MessageTTLDisabledError,
    NoRespondersError,
    PermissionDeniedError,
    PinIdMismatchError,
    PlaintextValueError,
    PriorityGroupNotFoundError,
    PullRequestError,
    RequestTimeoutError,
    RollupError,
    ServerError,
    ServerNotFoundError,
    StorageLimitError,
    StreamExistsError,
    StreamNotFoundError,
    TooManyInflightBatchesError,
    UnavailableError,
    UndecodableMessageError,
    UnknownKeyIdError,
    UnsupportedServerFeatureError,
    ValueTooLargeError,
    WrongEventLoopError,
    WrongLastSequenceError,
    WrongTypeError,
)
from ._options import (
    CONNECTION_OPTIONS,
    ConnectionOptions,
    bool_option,
    check_options,
    int_option,
    run_sync,
    str_option,
)
from ._protocol.bucket_config import (
    MAX_BUCKET_NAME,
    check_size,
    check_stream_limits,
    validate_bucket_name,
)
from ._protocol.duration import Duration, DurationValue, parse_duration
from ._protocol.limits import (
    MAX_CONTROL_LINE,
    check_message_size,
    check_subject_length,
    header_block_size,
    payload_room,
    subject_room,
)
from ._protocol.message import AckReply, StoredMessage, parse_ack_reply, parse_timestamp
from ._protocol.models import (
    AccountInfo,
    ApiError,
    ApiStats,
    ConsumerConfig,
    ConsumerInfo,
    PriorityGroupState,
    PubAck,
    StreamConfig,
    StreamInfo,
    StreamState,
)
from ._protocol.permissions import Permissions, SubjectRule
from ._protocol.subjects import DEFAULT_API_PREFIX, ApiSubjects
from ._protocol.ttl import (
    NEVER,
    TTLValue,
    format_ttl,
    parse_ttl,
    parse_ttl_at_least,
    parse_ttl_header,
)
from ._publish.acked import AckedPublisher
from ._publish.atomic import DEFAULT_COMMIT_DEADLINE, DEFAULT_MAX_BATCH, AtomicBatch, BatchAck
from ._publish.fast import FastPublisher
from ._resource import AsyncResource

__all__ = [
    "CONNECTION_OPTIONS",
    "DEFAULT_API_PREFIX",
    "DEFAULT_COMMIT_DEADLINE",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_TIMEOUT",
    "MAX_BUCKET_NAME",
    "MAX_CONTROL_LINE",
    "NEVER",
    "AccountInfo",
    "AckReply",
    "AckedPublisher",
    "ApiError",
    "ApiStats",
    "ApiSubjects",
    "AsyncResource",
    "AtomicBatch",
    "AuthenticationError",
    "BatchAbandonedError",
    "BatchAck",
    "BatchClosedError",
    "BatchProtocolError",
    "BatchPublishDisabledError",
    "BatchTooLargeError",
    "BatchUnsupportedHeaderError",
    "ClientValidationError",
    "ColumnError",
    "CommitUnknownError",
    "ConnectionClosedError",
    "ConnectionFailedError",
    "ConnectionOptions",
    "Consumer",
    "ConsumerConfig",
    "ConsumerDeletedError",
    "ConsumerExistsError",
    "ConsumerInfo",
    "ConsumerNotFoundError",
    "ConsumerStuckError",
    "DecryptionError",
    "DisconnectedError",
    "DuplicateMessageIdError",
    "Duration",
    "DurationValue",
    "EmbeddedCluster",
    "EmbeddedServer",
    "FastBatchError",
    "FastPublisher",
    "Feature",
    "HeartbeatMissedError",
    "InvalidBucketConfigError",
    "InvalidBucketNameError",
    "InvalidHeaderError",
    "InvalidKeyringError",
    "InvalidNameError",
    "InvalidStreamConfigError",
    "InvalidTTLError",
    "JetStream",
    "JetStreamError",
    "Keyring",
    "MessageIdInProcessError",
    "MessageNotFoundError",
    "MessageStream",
    "MessageTTLDisabledError",
    "MessageTooLargeError",
    "MessageTooLargeForPullError",
    "NoRespondersError",
    "OrderedConsumer",
    "PermissionDeniedError",
    "Permissions",
    "PinIdMismatchError",
    "PlaintextValueError",
    "PriorityGroupNotFoundError",
    "PriorityGroupState",
    "PubAck",
    "PullMessage",
    "PullRequestError",
    "RekeyReport",
    "RequestTimeoutError",
    "RollupError",
    "ServerError",
    "ServerNotFoundError",
    "StorageLimitError",
    "StoredMessage",
    "StreamConfig",
    "StreamExistsError",
    "StreamInfo",
    "StreamNotFoundError",
    "StreamState",
    "SubjectRule",
    "TTLValue",
    "TooManyInflightBatchesError",
    "UnavailableError",
    "UndecodableMessageError",
    "UnknownKeyIdError",
    "UnsupportedServerFeatureError",
    "ValueTooLargeError",
    "WrongEventLoopError",
    "WrongLastSequenceError",
    "WrongTypeError",
    "bool_option",
    "check_message_size",
    "check_options",
    "check_size",
    "check_stream_limits",
    "check_subject_length",
    "connect",
    "find_server_binary",
    "format_ttl",
    "header_block_size",
    "headers",
    "int_option",
    "parse_ack_reply",
    "parse_duration",
    "parse_timestamp",
    "parse_ttl",
    "parse_ttl_at_least",
    "parse_ttl_header",
    "payload_room",
    "run_sync",
    "scan_stream",
    "str_option",
    "stream_subjects",
    "subject_room",
    "validate_bucket_name",
]


# Errors that moved to the layer they belong to (kvstore, objstore) stay importable here by
# their old names. Resolved lazily so that jetstream itself never imports the layers above it.
_MOVED_ERRORS = {
    "BucketExistsError": "kvstore",
    "BucketNotFoundError": "kvstore",
    "InvalidKeyError": "kvstore",
    "KeyExistsError": "kvstore",
    "KeyNotFoundError": "kvstore",
    "WrongRevisionError": "kvstore",
    "DigestMismatchError": "objstore",
    "DuplicateObjectNameError": "objstore",
    "InvalidObjectMetaError": "objstore",
    "ObjectChangedError": "objstore",
    "InvalidObjectNameError": "objstore",
    "ObjectExistsError": "objstore",
    "ObjectNotFoundError": "objstore",
    "StoreExistsError": "objstore",
    "StoreNotFoundError": "objstore",
    "UploadFailedError": "objstore",
}


def __getattr__(name: str) -> object:
    package = _MOVED_ERRORS.get(name)
    if package is None:
        raise AttributeError(f"module 'jetstream' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(package), name)
