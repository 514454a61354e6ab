"""Client-side encryption of KV values: a value stage (``_stages.py``) sealing every value with
the keyring's primary key (AES-256-GCM, see ``jetstream._crypto.envelope``), bound to the bucket and
the stored key, and opening values sealed with any key of the ring.

Tombstones and server markers never reach a stage, so they stay plain and peers keep reading
them; only the value bytes are hidden (see docs/CODECS.md, "Encryption", for the threat model).
"""

from __future__ import annotations

import functools

from jetstream import (
    ClientValidationError,
    DecryptionError,
    InvalidKeyringError,
    Keyring,
    PlaintextValueError,
)
from jetstream import headers as hdr
from jetstream._crypto.envelope import associated_data
from jetstream._crypto.keyring import Opener

from ._stages import ValueContext

__all__ = ["EncryptionStage", "value_associated_data"]


def value_associated_data(bucket: str, stored_key: str) -> bytes:
    """What a KV value is bound to: its bucket and stored key (after the key codec), i.e.
    ``associated_data("kv", bucket, stored_key)``."""
    raw = stored_key.encode("utf-8", "surrogatepass")  # associated_data(stored_key), inline:
    return _bucket_prefix(bucket) + len(raw).to_bytes(4, "big") + raw  # it is on every write


@functools.lru_cache(maxsize=256)
def _bucket_prefix(bucket: str) -> bytes:
    return associated_data("kv", bucket)  # the same for every value of a bucket


class EncryptionStage:
    """Seals values with ``keyring``'s primary key and opens values sealed with any of its
    keys. A stored value without the ``Jetstore-Enc`` header is refused
    (:class:`PlaintextValueError`) unless ``allow_plaintext`` (migrating a plain bucket).

    Raises:
        ClientValidationError: ``keyring`` is not a :class:`jetstream.Keyring`.
    """

    def __init__(self, keyring: Keyring, *, allow_plaintext: bool = False) -> None:
        if not isinstance(keyring, Keyring):
            raise ClientValidationError(f"encryption must be a jetstream.Keyring, not {keyring!r}")
        self.keyring = keyring
        self.allow_plaintext = bool(allow_plaintext)
        # One random nonce base per stage, XOR a counter (as object chunks are sealed): a
        # system call less per value than a random nonce each.
        self._sealer = keyring.sealer()
        self._bound: dict[str, bytes] = {}  # bucket -> the sealer's bound AD prefix
        self._opened: dict[tuple[str, str], tuple[Opener, bytes]] = {}  # (header, bucket)

    def seal(self, value: bytes, context: ValueContext) -> bytes:
        """``value`` encrypted; adds the ``Jetstore-Enc`` header to ``context.headers``."""
        return self.seal_value(context.bucket, context.key, value, context.headers)

    def seal_value(
        self, bucket: str, stored_key: str, value: bytes, headers: dict[str, str]
    ) -> bytes:
        """:meth:`seal` without a :class:`ValueContext` (a bucket whose only stage this is)."""
        headers[hdr.ENCRYPTION] = self.header
        return self.seal_payload(bucket, stored_key, value)

    @property
    def header(self) -> str:
        """The ``Jetstore-Enc`` header of every value this stage seals (its primary key id)."""
        return self._sealer.header

    def seal_payload(self, bucket: str, stored_key: str, value: bytes) -> bytes:
        """The sealed payload of ``value`` alone; its message carries :attr:`header`. A batch
        seals its values this way while it sends (``put_many``), not before."""
        # The associated data of value_associated_data(), with its constant start (key id,
        # bucket) bound once per bucket: this runs for every value put_many sends.
        bound = self._bound.get(bucket)
        if bound is None:
            bound = self._bound[bucket] = self._sealer.bind(_bucket_prefix(bucket))
        raw = stored_key.encode("utf-8", "surrogatepass")
        associated = bound + len(raw).to_bytes(4, "big") + raw
        try:
            return self._sealer.seal_bound(value, associated)
        except InvalidKeyringError:  # 2**32 values sealed: a fresh nonce base
            self._sealer = self.keyring.sealer()  # same primary key: header and prefix hold
            return self._sealer.seal_bound(value, associated)

    def open(self, value: bytes, context: ValueContext) -> bytes:
        """The plaintext of a stored value.

        Raises:
            PlaintextValueError: no ``Jetstore-Enc`` header and not ``allow_plaintext``.
            UnknownKeyIdError: its key id is not in the ring.
            DecryptionError: wrong key, changed bytes or header, or moved from another key or
                bucket. Each names the stored key and the revision (the bucket sets
                ``.key`` to the user key).
        """
        return self.open_value(
            context.bucket, context.key, value, context.headers, context.revision
        )

    def open_value(
        self,
        bucket: str,
        stored_key: str,
        value: bytes,
        headers: dict[str, str],
        revision: int | None,
    ) -> bytes:
        """:meth:`open` without a :class:`ValueContext` (a bucket whose only stage this is).

        Raises:
            As :meth:`open`.
        """
        header = headers.get(hdr.ENCRYPTION)
        if header is None:
            if self.allow_plaintext:
                return value
            raise PlaintextValueError(
                f"{_where(bucket, stored_key, revision)}: value is not encrypted (open the "
                "bucket with allow_plaintext=True to read plain values while migrating)",
                key=stored_key,
                revision=revision,
            )
        try:
            # value_associated_data(), with its constant start (key id, bucket) bound once
            # per header and bucket: this runs for every value a get_many or a watch returns.
            bound = self._opened.get((header, bucket))
            if bound is None:
                bound = self._bind_opener(header, bucket)
            opener, prefix = bound
            raw = stored_key.encode("utf-8", "surrogatepass")
            return opener.open_bound(value, prefix + len(raw).to_bytes(4, "big") + raw)
        except DecryptionError as exc:
            raise type(exc)(
                f"{_where(bucket, stored_key, revision)}: {exc.description}",
                key=stored_key,
                revision=revision,
                key_id=exc.key_id,
            ) from None

    def _bind_opener(self, header: str, bucket: str) -> tuple[Opener, bytes]:
        """The opener of ``header`` and its prefix bound for ``bucket``, kept for the next
        value (only valid headers naming a key of the ring are kept: a few per bucket).

        Raises:
            UnknownKeyIdError, DecryptionError: as :meth:`jetstream.Keyring.opener`.
        """
        opener = self.keyring.opener(header)
        bound = self._opened[header, bucket] = (opener, opener.bind(_bucket_prefix(bucket)))
        return bound

    def __repr__(self) -> str:
        plain = ", allow_plaintext=True" if self.allow_plaintext else ""
        return f"EncryptionStage({self.keyring!r}{plain})"


def _where(bucket: str, stored_key: str, revision: int | None) -> str:
    return f"bucket {bucket!r} stored key {stored_key!r} revision {revision}"
