"""The encryption hot paths authenticate and frame exactly what the
plain, one-step functions do: wire format v1 is unchanged, only built with less work.

- A :class:`Sealer`'s bound sealing (``bind`` once, ``seal_bound`` per payload,
  ``seal_bound_into`` for chunks) opens with :meth:`Keyring.open` and the full associated
  data, and shares the nonce sequence with :meth:`Sealer.seal`.
- The KV stage and the chunk cipher bind the same data as ``value_associated_data`` and
  ``chunk_associated_data``.
- A batch's pre-encoded HPUB frames equal ``encode_hpub`` of the merged headers, and header
  sizes count UTF-8 bytes.
"""

from __future__ import annotations

import itertools
import os

import pytest

from jetstream import (
    ClientValidationError,
    DecryptionError,
    InvalidKeyringError,
    Keyring,
    PlaintextValueError,
    UnknownKeyIdError,
)
from jetstream._crypto.envelope import NONCE_SIZE, OVERHEAD, associated_data
from jetstream._protocol.limits import header_lines_size
from jetstream._publish.atomic import (
    _batch_frame,
    _batch_headers,
    _batch_id_lines,
    batch_header_size,
)
from jetstream._transport.hpub import encode_hpub, header_lines
from kvstore._encryption import EncryptionStage, value_associated_data
from kvstore._stages import ValueContext
from objstore._encryption import ChunkCipher, chunk_associated_data

K1 = bytes(range(32))
K2 = bytes(range(100, 132))
RING = Keyring({"k1": K1, "k2": K2}, primary="k2")


def _nonce(payload: bytes | bytearray) -> int:
    return int.from_bytes(payload[:NONCE_SIZE], "big")


@pytest.mark.parametrize("plaintext", [b"", b"v" * 100, bytes(range(256)) * 513])
def test_bound_sealing_opens_with_the_full_associated_data(plaintext: bytes) -> None:
    sealer = RING.sealer()
    start, rest = associated_data("kv", "bucket"), associated_data("key")
    bound = sealer.bind(start)
    for payload in (
        sealer.seal_bound(plaintext, bound + rest),
        sealer.seal_bound_into(plaintext, bound + rest),
    ):
        assert len(payload) == len(plaintext) + OVERHEAD
        assert RING.open(sealer.header, bytes(payload), start + rest) == plaintext
        with pytest.raises(DecryptionError):
            RING.open(sealer.header, bytes(payload), start + associated_data("other"))


def test_seal_bound_into_without_encrypt_into_falls_back_to_one_buffer() -> None:
    """cryptography before 45 has no ``encrypt_into``: the chunk is sealed the plain way."""
    sealer = RING.sealer()
    sealer._into = None  # as on cryptography < 45
    payload = sealer.seal_bound_into(b"chunk", sealer.bind(b"ad"))
    assert isinstance(payload, bytes)
    assert RING.open(sealer.header, payload, b"ad") == b"chunk"


def test_every_way_of_sealing_draws_from_one_nonce_sequence() -> None:
    sealer = RING.sealer()
    bound = sealer.bind(b"ad")
    payloads = []
    for round_no in range(30):
        payloads.append(sealer.seal(b"x", b"ad")[1])
        payloads.append(sealer.seal_bound(b"x", bound))
        payloads.append(sealer.seal_bound_into(b"x" * (round_no * 1000), bound))
    nonces = [_nonce(p) for p in payloads]
    assert [n ^ nonces[0] for n in nonces] == list(range(90))  # base XOR 0, 1, 2, ...


# Python 3.12+ warns about fork() in a process with threads; the child only seals and exits.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_never_reuses_its_parents_nonces() -> None:
    """The nonce is a base drawn once plus a counter; a child forked from a process that
    holds a sealer would count from the same base under the same key (GCM nonce reuse)."""
    sealer = RING.sealer()
    sealer.seal_bound(b"before the fork", sealer.bind(b"ad"))
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: seal once, report the nonce, leave without any cleanup
        os.write(write_end, sealer.seal_bound(b"child", sealer.bind(b"ad"))[:NONCE_SIZE])
        os._exit(0)
    os.close(write_end)
    child_nonce = os.read(read_end, NONCE_SIZE)
    os.close(read_end)
    os.waitpid(pid, 0)
    parent_nonce = sealer.seal_bound(b"parent", sealer.bind(b"ad"))[:NONCE_SIZE]
    assert len(child_nonce) == NONCE_SIZE and child_nonce != parent_nonce


def test_bound_sealing_keeps_the_sealers_limit() -> None:
    sealer = RING.sealer()
    sealer._count = itertools.count(2**32)  # as after 2**32 payloads
    for seal in (sealer.seal_bound, sealer.seal_bound_into):
        with pytest.raises(InvalidKeyringError):
            seal(b"x", sealer.bind(b""))


@pytest.mark.parametrize(("bucket", "key"), [("b", "k.1"), ("orders", "a.b.ключ"), ("b2", "")])
def test_the_kv_stage_binds_what_value_associated_data_says(bucket: str, key: str) -> None:
    stage = EncryptionStage(RING)
    for _ in range(2):  # the second value reuses the bucket's bound prefix
        headers: dict[str, str] = {}
        payload = stage.seal(b"secret", ValueContext(bucket, key, headers))
        assert headers == {"Jetstore-Enc": "v1;k2"}
        assert RING.open(headers["Jetstore-Enc"], payload, value_associated_data(bucket, key)) == (
            b"secret"
        )
    other: dict[str, str] = {}
    payload = stage.seal(b"secret", ValueContext("other", key, other))  # another bucket
    with pytest.raises(DecryptionError):
        RING.open(other["Jetstore-Enc"], payload, value_associated_data(bucket, key))


@pytest.mark.parametrize(("bucket", "key"), [("b", "k.1"), ("orders", "a.b.ключ"), ("b2", "")])
def test_the_kv_stage_opens_what_the_keyring_opens(bucket: str, key: str) -> None:
    """The stage's bound opening (an :class:`Opener` per header and bucket, kept) accepts and
    refuses exactly what ``Keyring.open`` with ``value_associated_data`` does."""
    stage = EncryptionStage(RING)
    old_header, old = RING.seal(b"old", value_associated_data(bucket, key))  # under k2
    k1_header = "v1;k1"
    k1 = Keyring({"k1": K1}, primary="k1").seal(b"k1 value", value_associated_data(bucket, key))
    for _ in range(2):  # the second read reuses the kept opener and prefix
        assert stage.open_value(bucket, key, old, {"Jetstore-Enc": old_header}, 3) == b"old"
        assert stage.open_value(bucket, key, k1[1], {"Jetstore-Enc": k1_header}, 4) == (b"k1 value")
        with pytest.raises(DecryptionError) as moved:  # the same bytes under another key
            stage.open_value(bucket, key + "x", old, {"Jetstore-Enc": old_header}, 5)
        assert (moved.value.key, moved.value.revision, moved.value.key_id) == (key + "x", 5, "k2")
        with pytest.raises(DecryptionError):  # another bucket
            stage.open_value(bucket + "x", key, old, {"Jetstore-Enc": old_header}, 5)
        with pytest.raises(DecryptionError):  # too short to hold a nonce and a tag
            stage.open_value(bucket, key, old[: OVERHEAD - 1], {"Jetstore-Enc": old_header}, 5)
    with pytest.raises(UnknownKeyIdError) as unknown:
        stage.open_value(bucket, key, old, {"Jetstore-Enc": "v1;gone"}, 6)
    assert (unknown.value.key, unknown.value.revision, unknown.value.key_id) == (key, 6, "gone")
    with pytest.raises(DecryptionError):
        stage.open_value(bucket, key, old, {"Jetstore-Enc": "v2;k2"}, 6)
    assert {header for header, _ in stage._opened} == {old_header, k1_header}  # valid ones only
    with pytest.raises(PlaintextValueError):
        stage.open_value(bucket, key, b"plain", {}, 7)
    assert EncryptionStage(RING, allow_plaintext=True).open_value(bucket, key, b"p", {}, 7) == b"p"


def test_an_opener_opens_what_the_keyring_opens() -> None:
    header, payload = RING.seal(b"secret", b"ad")
    opener = RING.opener(header)
    assert opener.key_id == "k2" and "k2" in repr(opener) and "secret" not in repr(opener)
    assert opener.open_bound(payload, opener.bind(b"ad")) == b"secret"
    with pytest.raises(DecryptionError):
        opener.open_bound(payload, opener.bind(b"other"))
    with pytest.raises(UnknownKeyIdError):
        RING.opener("v1;nope")
    with pytest.raises(DecryptionError):
        RING.opener("not a header")


@pytest.mark.parametrize(("index", "last"), [(0, False), (7, True), (12345, False)])
def test_the_chunk_cipher_binds_what_chunk_associated_data_says(index: int, last: bool) -> None:
    cipher = ChunkCipher(RING)
    sealer = RING.sealer()
    bound = cipher.bind(sealer, "store", "NUID123")
    payload = cipher.seal(sealer, bound, index, last, b"chunk" * 100)
    headers = cipher.chunk_headers()
    ad = chunk_associated_data("store", "NUID123", index, last)
    assert RING.open(headers["Jetstore-Enc"], bytes(payload), ad) == b"chunk" * 100
    plain, was_plain = cipher.open(
        "store", "name", "NUID123", index, last, bytes(payload), headers, plain=None
    )
    assert plain == b"chunk" * 100 and was_plain is False


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Jetstore-Enc": "v1;k2"},
        {"Jetstore-Enc": "v1;k2", "Nats-TTL": "5s", "Nats-Rollup": "sub"},
        {"X-Note": "café ünïcode", "Nats-Expected-Last-Subject-Sequence": "0"},
    ],
)
@pytest.mark.parametrize("seq", [2, 999, 1000])
def test_a_batch_frame_is_encode_hpub_of_the_merged_headers(
    headers: dict[str, str], seq: int
) -> None:
    batch_id = "A" * 22
    frame = _batch_frame(
        "$KV.b.k.1", header_lines(headers), b"payload", _batch_id_lines(batch_id), seq
    )
    assert frame == encode_hpub("$KV.b.k.1", _batch_headers(headers, batch_id, seq), b"payload")
    lines = header_lines(_batch_headers(headers, batch_id, seq))
    assert header_lines_size(headers) + batch_header_size(seq) == len(lines)


def test_header_sizes_count_utf8_bytes() -> None:
    for headers in ({}, {"A": "b"}, {"X-Note": "café"}, {"K": "日本", "L": "ascii"}):
        assert header_lines_size(headers) == len(header_lines(headers))


def test_bad_input_to_opening_is_a_typed_error() -> None:
    """A caller's str, None or int never reaches cryptography: a ClientValidationError."""
    header, payload = RING.seal(b"secret", b"ad")
    opener = RING.opener(header)
    for bad_header in (None, 5, header.encode()):
        with pytest.raises(ClientValidationError):
            RING.opener(bad_header)  # type: ignore[arg-type]
        with pytest.raises(ClientValidationError):
            RING.open(bad_header, payload, b"ad")  # type: ignore[arg-type]
    for bad in ("x" * 40, None, 5):
        with pytest.raises(ClientValidationError):
            opener.open_bound(bad, opener.bind(b"ad"))  # type: ignore[arg-type]
        with pytest.raises(ClientValidationError):
            RING.open(header, bad, b"ad")  # type: ignore[arg-type]
        with pytest.raises(ClientValidationError):
            RING.open(header, payload, bad)  # type: ignore[arg-type]
    assert RING.open(header, memoryview(payload), b"ad") == b"secret"
    # The opener's quick way for well-formed bytes falls back to the checked one for the rest.
    bound = opener.bind(b"ad")
    with pytest.raises(ClientValidationError):
        opener.open_bound(payload, "ad")  # type: ignore[arg-type]
    assert opener.open_bound(bytearray(payload), bound) == b"secret"
    with pytest.raises(DecryptionError):
        opener.open_bound(payload[:27], bound)
    with pytest.raises(DecryptionError):
        opener.open_bound(payload[:-1] + bytes([payload[-1] ^ 1]), bound)
