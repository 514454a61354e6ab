"""jetstream: the JetStream protocol layer of jetstore, on nats-py's core client.

It is the only package that knows subjects, headers and the JSON API. ``kvstore`` and
``objstore`` are built on its public names::

    async with jetstream.EmbeddedServer() as server:
        async with await jetstream.connect(server.url) as js:
            info = await js.account_info()
"""

from . import headers
from ._api import DEFAULT_API_PREFIX, ApiSubjects
from ._context import DEFAULT_TIMEOUT, Feature, JetStream, connect
from ._errors import (
    BucketExistsError,
    BucketNotFoundError,
    ClientValidationError,
    InvalidBucketConfigError,
    InvalidBucketNameError,
    InvalidHeaderError,
    InvalidKeyError,
    InvalidStreamConfigError,
    InvalidTTLError,
    JetStreamError,
    KeyExistsError,
    KeyNotFoundError,
    MessageNotFoundError,
    MessageTooLargeError,
    MessageTTLDisabledError,
    NoRespondersError,
    RequestTimeoutError,
    ServerError,
    ServerNotFoundError,
    StorageLimitError,
    StreamExistsError,
    StreamNotFoundError,
    UnsupportedServerFeatureError,
    ValueTooLargeError,
    WrongLastSequenceError,
    WrongRevisionError,
)
from ._message import AckReply, StoredMessage, parse_ack_reply
from ._models import (
    AccountInfo,
    ApiError,
    ApiStats,
    ConsumerInfo,
    PubAck,
    StreamConfig,
    StreamInfo,
    StreamState,
)
from ._scan import scan_stream
from ._server import EmbeddedServer, find_server_binary
from ._ttl import NEVER, TTLValue, format_ttl, parse_ttl, parse_ttl_header

__all__ = [
    "DEFAULT_API_PREFIX",
    "DEFAULT_TIMEOUT",
    "NEVER",
    "AccountInfo",
    "AckReply",
    "ApiError",
    "ApiStats",
    "ApiSubjects",
    "BucketExistsError",
    "BucketNotFoundError",
    "ClientValidationError",
    "ConsumerInfo",
    "EmbeddedServer",
    "Feature",
    "InvalidBucketConfigError",
    "InvalidBucketNameError",
    "InvalidHeaderError",
    "InvalidKeyError",
    "InvalidStreamConfigError",
    "InvalidTTLError",
    "JetStream",
    "JetStreamError",
    "KeyExistsError",
    "KeyNotFoundError",
    "MessageNotFoundError",
    "MessageTTLDisabledError",
    "MessageTooLargeError",
    "NoRespondersError",
    "PubAck",
    "RequestTimeoutError",
    "ServerError",
    "ServerNotFoundError",
    "StorageLimitError",
    "StoredMessage",
    "StreamConfig",
    "StreamExistsError",
    "StreamInfo",
    "StreamNotFoundError",
    "StreamState",
    "TTLValue",
    "UnsupportedServerFeatureError",
    "ValueTooLargeError",
    "WrongLastSequenceError",
    "WrongRevisionError",
    "connect",
    "find_server_binary",
    "format_ttl",
    "headers",
    "parse_ack_reply",
    "parse_ttl",
    "parse_ttl_header",
    "scan_stream",
]
