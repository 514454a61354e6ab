"""BucketCore: what every part of a bucket handle works on (its stream, subjects, key codec,
value stages and the reads and writes of one key), shared by :class:`Bucket` and the helpers
that serve it (batches, watches, snapshots, rekey, compaction), so none of them reaches into
the facade."""

from __future__ import annotations

from collections.abc import Sequence

from nats.nuid import NUID

from jetstream import (
    NEVER,
    ClientValidationError,
    DecryptionError,
    InvalidTTLError,
    JetStream,
    MessageNotFoundError,
    StoredMessage,
    TTLValue,
    UndecodableMessageError,
    ValueTooLargeError,
    WrongLastSequenceError,
)
from jetstream import headers as hdr
from jetstream._crypto.envelope import OVERHEAD
from jetstream._errors import check_bytes_like
from jetstream._protocol.limits import subject_room
from jetstream._protocol.ttl import format_ttl, parse_ttl_at_least, parse_ttl_header

from ._codecs import KeyCodec, encode_filter
from ._encryption import EncryptionStage
from ._errors import (
    InvalidKeyError,
    KeyDecodeError,
    KeyNotFoundError,
    WrongRevisionError,
    missing_bucket,
)
from ._keys import checked_filters, distinct_filters, validate_filter, validate_key
from ._models import BucketConfig, Entry, Op, op_from_headers, stream_name, subject_prefix
from ._name_codec import NEW_NAME_FORMAT, bind_key_codec
from ._own_writes import OwnWrites
from ._stages import ValueContext, ValueStage

__all__ = ["BucketCore", "BytesLike", "expecting"]

BytesLike = bytes | bytearray | memoryview

_CONSUMER_NAME_ROOM = 40  # generated consumer names: a NUID and a serial


class BucketCore:
    """One bucket as this handle binds it: the names, options and per-key reads and writes
    that :class:`Bucket` and its helpers share. Every request runs in :attr:`missing`, so a
    bucket deleted by anyone is :class:`BucketNotFoundError` naming it."""

    def __init__(
        self,
        js: JetStream,
        name: str,
        config: BucketConfig,
        *,
        direct: bool = True,
        key_codec: KeyCodec | None = None,
        value_stages: Sequence[ValueStage] = (),
        encryption: EncryptionStage | None = None,
        name_format: str | None = NEW_NAME_FORMAT,
    ) -> None:
        self.js = js
        # An EncryptedKeyCodec seals names for this bucket, in the format its stream records.
        self.key_codec = None if key_codec is None else bind_key_codec(key_codec, name, name_format)
        # The seam for value transforms: see _stages.py. Encryption is the last stage on a
        # write (it seals what every other stage produced) and the first on a read.
        self.encryption = encryption
        self.value_stages: tuple[ValueStage, ...] = (
            *value_stages,
            *((encryption,) if encryption is not None else ()),
        )
        # Encryption alone (every encrypted bucket today) seals without a ValueContext per
        # value: put_many's cost goal counts every microsecond per value.
        self.sole_encryption = encryption if not value_stages else None
        self.direct = direct  # buckets made by nats-py lack allow_direct
        self.name = name
        self.config = config
        self.stream = stream_name(name)
        self.prefix = subject_prefix(name)
        self._key_limit: tuple[int, int] | None = None  # (max_payload, its key limit)
        self.own_writes = OwnWrites()  # so this handle's reads never predate its writes
        # Every operation that reaches the server runs in it: a bucket deleted by anyone is
        # BucketNotFoundError naming it, whatever the server answered (10059, or a 503).
        self.missing = missing_bucket(js, name)

    @property
    def max_key_length(self) -> int:
        """The longest key (or key filter) this bucket accepts on this connection.

        Every request naming a key must fit the server's control line (4096 bytes by default;
        a longer one makes the server close the connection): the longest is a watch's
        filtered consumer create, ``$JS.API.CONSUMER.CREATE.<stream>.<name>.$KV.<bucket>.<key>``
        with its reply inbox and size. Longer keys raise :class:`InvalidKeyError`.
        """
        nc = self.js.nc
        cached = self._key_limit
        if cached is None or cached[0] != nc.max_payload:  # another server may say otherwise
            api = self.js.api.consumer_create(self.stream, "n" * _CONSUMER_NAME_ROOM, self.prefix)
            cached = self._key_limit = (nc.max_payload, subject_room(nc) - len(api))
        return cached[1]

    def subject(self, key: str) -> str:
        """The subject of a user key: encoded by the key codec, then checked against the KV
        key rules and the longest key the server's control line holds."""
        codec = self.key_codec
        if codec is None:
            validate_key(key, max_length=self.max_key_length)
            return self.prefix + key
        stored = codec.encode_key(key)
        try:
            validate_key(stored, max_length=self.max_key_length)
        except InvalidKeyError as exc:
            raise InvalidKeyError(f"key {key!r}, stored as {stored!r}: {exc}") from None
        return self.prefix + stored

    def filter_subjects(self, filters: str | list[str]) -> list[str]:
        """The subjects of user key filters (encoded by the key codec where it can)."""
        patterns = checked_filters(filters)
        if not patterns:
            raise ClientValidationError("a key filter list needs at least one filter")
        longest = self.max_key_length
        stored_patterns = []
        for pattern in patterns:
            stored = pattern if self.key_codec is None else encode_filter(self.key_codec, pattern)
            try:
                validate_filter(stored, max_length=longest)
            except InvalidKeyError as exc:
                if stored is pattern:
                    raise
                raise InvalidKeyError(f"filter {pattern!r}, stored as {stored!r}: {exc}") from None
            stored_patterns.append(stored)
        return [self.prefix + stored for stored in distinct_filters(stored_patterns)]

    def decode_key(self, stored: str) -> str:
        """The user key of a stored key.

        Raises:
            KeyDecodeError: the codec cannot decode it (written without the codec).
        """
        codec = self.key_codec
        if codec is None:
            return stored
        try:
            return codec.decode_key(stored)
        except KeyDecodeError:
            raise
        except Exception as exc:  # a custom codec's own error: reported (and skipped) as ours
            raise KeyDecodeError(stored, f"{codec!r} failed: {exc!r}") from exc

    def ttl_headers(self, ttl: TTLValue | None) -> dict[str, str]:
        if ttl is None:
            return {}
        seconds = self.checked_ttl(ttl)
        headers = {hdr.TTL: format_ttl(seconds)}
        if self.config.history > 1 and seconds != NEVER:
            headers[hdr.ROLLUP] = hdr.ROLLUP_SUBJECT  # a key TTL, not a revision TTL
        return headers

    def delete_headers(self) -> dict[str, str]:
        return {hdr.KV_OPERATION: hdr.KV_OPERATION_DELETE}

    def purge_headers(self, ttl: TTLValue | None) -> dict[str, str]:
        headers = {hdr.KV_OPERATION: hdr.KV_OPERATION_PURGE, hdr.ROLLUP: hdr.ROLLUP_SUBJECT}
        if ttl is not None:
            headers[hdr.TTL] = format_ttl(self.checked_ttl(ttl))
        return headers

    def checked_ttl(self, ttl: TTLValue) -> int:
        # With one revision per key the server does not stretch TTLs to marker_ttl.
        floor = self.config.marker_ttl if self.config.history > 1 else None
        return parse_ttl_at_least(ttl, floor, owner=f"bucket {self.name!r}")

    @staticmethod
    def stored_ttl(headers: dict[str, str]) -> int | None:
        text = headers.get(hdr.TTL)
        if not text:
            return None
        try:
            return parse_ttl_header(text)
        except InvalidTTLError:
            return None

    def payload(self, value: BytesLike) -> bytes:
        data = bytes(check_bytes_like(value, "value"))
        limit = self.config.max_value_size
        if limit > 0 and len(data) > limit:
            raise ValueTooLargeError(f"value of {len(data)} bytes exceeds max_value_size {limit}")
        max_payload = self.js.nc.max_payload
        if max_payload and len(data) > max_payload:  # fail early; the whole message is
            raise ValueTooLargeError(  # checked (with its headers) before it is sent
                f"value of {len(data)} bytes exceeds the server's max payload {max_payload}"
            )
        return data

    async def write(self, key: str, value: BytesLike, headers: dict[str, str]) -> int:
        """One write, idempotent through a ``Nats-Msg-Id``: a lost ack is retried until the
        context's ``retry_deadline`` and never stores the value twice."""
        subject = self.subject(key)
        data = self.payload(value)
        if self.value_stages:
            headers = dict(headers)  # a stage may add headers of its own
            data = self.seal(subject, data, headers)
        msg_id = NUID().next().decode()
        async with self.missing:
            ack = await self.js.publish(subject, data, headers=headers, msg_id=msg_id)
        self.own_writes.note(subject, ack.seq)
        return ack.seq

    def seal(self, subject: str, data: bytes, headers: dict[str, str]) -> bytes:
        """``data`` through the value stages, first to last (tombstones stay plain)."""
        if not self.value_stages or hdr.KV_OPERATION in headers:
            return data
        stored_key = subject[len(self.prefix) :]
        if self.sole_encryption is not None:
            return self.sole_encryption.seal_value(self.name, stored_key, data, headers)
        context = ValueContext(self.name, stored_key, headers)
        for stage in self.value_stages:
            data = stage.seal(data, context)
        return data

    def defer_seal(self, headers: dict[str, str]) -> bool:
        """Whether a batched value can be sealed later, while the batch is sent (only the
        bucket's encryption: its payload size and headers are known before it seals); if so,
        ``headers`` gets its ``Jetstore-Enc`` header now."""
        if self.sole_encryption is None:
            return False
        headers[hdr.ENCRYPTION] = self.sole_encryption.header
        return True

    def seal_deferred(self, subject: str, data: bytes) -> bytes:
        """The payload of a value :meth:`defer_seal` kept plain, sealed as it is sent."""
        assert self.sole_encryption is not None
        stored_key = subject[len(self.prefix) :]
        return self.sole_encryption.seal_payload(self.name, stored_key, data)

    @property
    def seal_overhead(self) -> int:
        return OVERHEAD if self.sole_encryption is not None else 0

    def open(self, subject: str, data: bytes, headers: dict[str, str], revision: int) -> bytes:
        """A stored value through the value stages, last to first."""
        stored_key = subject[len(self.prefix) :]
        if self.sole_encryption is not None:
            return self.sole_encryption.open_value(self.name, stored_key, data, headers, revision)
        context = ValueContext(self.name, stored_key, headers, revision)
        for stage in reversed(self.value_stages):
            data = stage.open(data, context)
        return data

    async def write_expecting(
        self, key: str, value: BytesLike, headers: dict[str, str], revision: int
    ) -> int:
        try:
            return await self.write(key, value, expecting(headers, revision))
        except WrongLastSequenceError as exc:
            current = exc.last_sequence
            if current is None:
                current = await self.latest_revision(key)
            raise WrongRevisionError(key, revision, current, err_code=exc.err_code) from exc

    async def latest_revision(self, key: str) -> int:
        try:
            return (await self.last_message(key)).seq
        except MessageNotFoundError:
            return 0

    async def last_message_or_none(self, key: str, *, at_least: int = 0) -> StoredMessage | None:
        try:
            return await self.last_message(key, at_least=at_least)
        except MessageNotFoundError:
            return None

    async def last_message(self, key: str, *, at_least: int = 0) -> StoredMessage:
        """The newest message of ``key``, never older than this handle's own write of it nor
        than ``at_least`` (a revision the server named): a replica that answers before it has
        caught up is overruled by the stream leader."""
        subject = self.subject(key)
        async with self.missing:
            if not self.direct:
                return await self.js.get_last_message(self.stream, subject, direct=False)
            floor = max(self.own_writes.revision(subject), at_least)
            try:
                message = await self.js.get_last_message(self.stream, subject)
            except MessageNotFoundError:
                if not floor:
                    raise
            else:
                if message.seq >= floor:
                    return message
            return await self.js.get_last_message(self.stream, subject, direct=False)

    async def message_at(self, key: str, revision: int) -> StoredMessage:
        subject = self.subject(key)
        try:
            message = await self.stored_message(revision)
        except MessageNotFoundError as exc:
            raise KeyNotFoundError(key, f"key {key!r} has no revision {revision}") from exc
        except UndecodableMessageError:  # a subject that is not UTF-8 is no key's
            message = None
        if message is None or message.subject != subject:
            raise KeyNotFoundError(key, f"revision {revision} is not a revision of key {key!r}")
        return message

    async def stored_message(self, revision: int) -> StoredMessage:
        """The message at ``revision``; a replica that lacks it (it may trail the leader) is
        overruled by the stream leader before the revision is called missing."""
        async with self.missing:
            try:
                return await self.js.get_message(self.stream, revision, direct=self.direct)
            except MessageNotFoundError:
                if not self.direct:
                    raise
            return await self.js.get_message(self.stream, revision, direct=False)

    def entry(self, message: StoredMessage) -> Entry:
        return self.entry_of(
            message.subject, message.data, message.seq, message.time_ns, message.headers
        )

    def entry_of(
        self,
        subject: str,
        value: bytes,
        revision: int,
        created_ns: int,
        headers: dict[str, str],
        delta: int | None = None,
        *,
        headers_only: bool = False,
    ) -> Entry:
        """The entry a stored message (get) or a delivered one (watch, history) stands for;
        ``headers_only``: a delivery without its value (a ``meta_only`` watch), not opened.
        Tombstones and markers have an empty value, whatever payload their message has.

        Only the caller knows that it asked for no values: a ``Nats-Msg-Size`` header can be
        stored by any client, and taking it for the sign made a plain value slipped into an
        encrypted bucket read as if it had been decrypted."""
        op = op_from_headers(headers) if headers else Op.PUT  # most messages of a watch
        key = subject[len(self.prefix) :]
        if self.key_codec is not None:
            key = self.decode_key(key)
        if op is not Op.PUT:
            # A tombstone or marker has no value. A peer may still send one with a payload,
            # which no stage opens (in an encrypted bucket it is unauthenticated): never
            # shown as if it were the key's value.
            value = b""
        elif self.value_stages and not headers_only:
            try:
                value = self.open(subject, value, headers, revision)
            except DecryptionError as exc:
                exc.key = key  # the stage knows the stored key; callers name the user key
                raise
        ttl = self.stored_ttl(headers) if headers and hdr.TTL in headers else None
        # Positional: cheaper than keywords, once per event of a watch.
        return Entry(self.name, key, value, revision, created_ns, op, delta, ttl)


def expecting(headers: dict[str, str], revision: int) -> dict[str, str]:
    """``headers`` with the condition that the key's last revision is ``revision``."""
    return {**headers, hdr.EXPECTED_LAST_SUBJECT_SEQUENCE: str(revision)}
