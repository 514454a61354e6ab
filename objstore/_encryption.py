"""Client-side encryption of objects, chunk by chunk (streamed: one chunk in memory at a time).

Each chunk is sealed on its own (AES-256-GCM envelope v1, ``jetstream._crypto.envelope``) with the
keyring's primary key and a ``Jetstore-Enc`` header, its associated data binding it to the
store, the object's nuid, its index and whether it is the last chunk. So chunks reordered,
dropped, swapped between objects or stores, or an object cut short (its last chunk would not
be marked last) fail to decrypt. An encrypted object always has at least one chunk (an empty
object is one sealed empty chunk), so a meta record claiming zero chunks cannot pass off an
empty object. The ADR-20 size and digest cover the stored (sealed) bytes, so peers still
verify and copy the object; the meta record's headers carry ``Jetstore-Enc`` too, for peers.
"""

from __future__ import annotations

from typing import cast

from jetstream import (
    ClientValidationError,
    DecryptionError,
    Keyring,
    PlaintextValueError,
)
from jetstream import headers as hdr
from jetstream._crypto.envelope import OVERHEAD, associated_data, format_header
from jetstream._crypto.keyring import Sealer

__all__ = ["OVERHEAD", "ChunkCipher", "chunk_associated_data", "cipher_for"]


def chunk_associated_data(store: str, nuid: str, index: int, last: bool) -> bytes:
    """What a chunk is bound to: store, object nuid, index and the last-chunk mark."""
    return associated_data("obj", store, nuid, str(index), "last" if last else "more")


class ChunkCipher:
    """Seals chunks with ``keyring``'s primary key, opens chunks sealed with any of its keys.
    Plain chunks are refused (:class:`PlaintextValueError`) unless ``allow_plaintext``."""

    def __init__(self, keyring: Keyring, *, allow_plaintext: bool = False) -> None:
        self.keyring = keyring
        self.allow_plaintext = bool(allow_plaintext)

    def meta_headers(self) -> dict[str, list[str]]:
        """The meta record headers marking an object encrypted (and with which key id)."""
        return {hdr.ENCRYPTION: [format_header(self.keyring.primary)]}

    def chunk_headers(self) -> dict[str, str]:
        """The headers a sealed chunk is sent with."""
        return {hdr.ENCRYPTION: format_header(self.keyring.primary)}

    def seal(self, sealer: Sealer, bound: bytes, index: int, last: bool, chunk: bytes) -> bytes:
        """The sealed chunk (``sealer``: one per object, from ``keyring.sealer()``; ``bound``:
        :meth:`bind` of the object); it is sent with :meth:`chunk_headers`."""
        associated = bound + associated_data(str(index), "last" if last else "more")
        payload = sealer.seal_bound_into(chunk, associated)
        # Possibly a bytearray (built in place); hashlib and nats-py take any buffer, as they
        # take the memoryview slices a bytes source is cut into.
        return cast(bytes, payload)

    @staticmethod
    def bind(sealer: Sealer, store: str, nuid: str) -> bytes:
        """The constant start of an object's chunk associated data, bound once per object
        (see :func:`chunk_associated_data`)."""
        return sealer.bind(associated_data("obj", store, nuid))

    def open(
        self,
        store: str,
        name: str,
        nuid: str,
        index: int,
        last: bool,
        chunk: bytes,
        headers: dict[str, str],
        *,
        plain: bool | None,
    ) -> tuple[bytes, bool]:
        """The plaintext of chunk ``index`` and whether the object is plain. ``plain`` is what
        the object's earlier chunks were (None for the first): an object is all one or all the
        other.

        Raises:
            PlaintextValueError: a plain object and not ``allow_plaintext``.
            UnknownKeyIdError: the chunk's key id is not in the ring.
            DecryptionError: a changed, moved, reordered or missing chunk, the wrong key, or a
                plain chunk in an encrypted object.
        """
        where = f"object {name!r} chunk {index}"
        header = headers.get(hdr.ENCRYPTION)
        if header is None:
            if plain is False:
                raise DecryptionError(
                    f"{where}: not encrypted, unlike the chunks before it", key=name
                )
            if not self.allow_plaintext:
                raise PlaintextValueError(
                    f"{where}: object is not encrypted (open the store with "
                    "allow_plaintext=True to read plain objects while migrating)",
                    key=name,
                )
            return chunk, True
        if plain:
            raise DecryptionError(f"{where}: encrypted, unlike the chunks before it", key=name)
        try:
            ad = chunk_associated_data(store, nuid, index, last)
            return self.keyring.open(header, chunk, ad), False
        except DecryptionError as exc:
            raise type(exc)(
                f"{where}: {exc.description} (or chunks reordered, dropped or cut short)",
                key=name,
                key_id=exc.key_id,
            ) from None

    def check_empty(self, name: str, meta_headers: dict[str, list[str]] | None) -> None:
        """An object whose meta record claims no chunks: encrypted objects never have none.

        Raises:
            DecryptionError: its meta record says it is encrypted (its chunks were dropped).
            PlaintextValueError: a plain empty object and not ``allow_plaintext``.
        """
        if meta_headers and hdr.ENCRYPTION in meta_headers:
            raise DecryptionError(
                f"object {name!r}: encrypted, but its record claims no chunks", key=name
            )
        if not self.allow_plaintext:
            raise PlaintextValueError(f"object {name!r}: empty and not encrypted", key=name)

    def __repr__(self) -> str:
        plain = ", allow_plaintext=True" if self.allow_plaintext else ""
        return f"ChunkCipher({self.keyring!r}{plain})"


def cipher_for(encryption: object, allow_plaintext: bool) -> ChunkCipher | None:
    """The cipher for a store's ``encryption=``/``allow_plaintext=`` options.

    Raises:
        ClientValidationError: ``encryption`` is not a Keyring, or ``allow_plaintext``
            without it.
    """
    if encryption is None:
        if allow_plaintext:
            raise ClientValidationError("allow_plaintext needs encryption= (a Keyring)")
        return None
    if not isinstance(encryption, Keyring):
        raise ClientValidationError(f"encryption must be a jetstream.Keyring, not {encryption!r}")
    return ChunkCipher(encryption, allow_plaintext=allow_plaintext)
