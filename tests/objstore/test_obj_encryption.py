"""Client-side encrypted object stores (``encryption=Keyring``) on a real server: objects
round trip chunk by chunk, peers (nats-py) read and verify the stored (sealed) bytes, and
every way of rearranging chunks raises a typed error, even when the meta record is "fixed" to
match (the digest and size are not secrets: an attacker can recompute them)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from nats.js import JetStreamContext

import jetstream
import objstore
import objstore._rekey
import objstore._upload
from jetstream import DecryptionError, Keyring, PlaintextValueError, UnknownKeyIdError
from jetstream._consume.scan import scan_stream
from objstore._encryption import chunk_associated_data
from objstore._models import chunk_subject, meta_subject
from tests.conftest import StoreFactory

K1 = bytes(range(32))
K2 = bytes(range(64, 96))
RING1 = Keyring({"k1": K1}, primary="k1")
RING12 = Keyring({"k1": K1, "k2": K2}, primary="k2")
RING2 = Keyring({"k2": K2}, primary="k2")
ENC = jetstream.headers.ENCRYPTION
DATA = bytes(range(256)) * 41  # 10496 bytes: 10 chunks of 1024 and one of 256


async def _chunks(
    js: jetstream.JetStream, store: objstore.ObjectStore, nuid: str
) -> list[jetstream.StoredMessage]:
    return [
        m
        async for m in scan_stream(
            js, store.stream, [chunk_subject(store.name, nuid)], last_per_subject=False
        )
    ]


async def _forge(
    js: jetstream.JetStream,
    store: objstore.ObjectStore,
    name: str,
    chunks: list[tuple[bytes, dict[str, str]]],
    *,
    nuid: str | None = None,
    headers: dict[str, list[str]] | None = None,
) -> None:
    """Replace an object's chunks and write a meta record that matches them exactly (size,
    count, digest): what someone with write access to the stream can do."""
    info = await store.info(name)
    nuid = nuid or info.nuid
    subject = chunk_subject(store.name, nuid)
    await js.purge_stream(store.stream, subject=subject)
    for data, chunk_headers in chunks:
        await js.publish(
            subject, data, headers={k: v for k, v in chunk_headers.items() if k == ENC} or None
        )
    digest = hashlib.sha256(b"".join(data for data, _ in chunks)).digest()
    forged = msgspec.structs.replace(
        info,
        nuid=nuid,
        size=sum(len(data) for data, _ in chunks),
        chunks=len(chunks),
        digest="SHA-256=" + base64.urlsafe_b64encode(digest).decode(),
        headers=info.headers if headers is None else headers,
    )
    await js.publish(
        meta_subject(store.name, name),
        msgspec.json.encode(forged),
        headers={jetstream.headers.ROLLUP: "sub"},
    )


async def test_objects_round_trip_and_peers_see_verifiable_ciphertext(
    js: jetstream.JetStream,
    make_store: StoreFactory,
    peer: JetStreamContext,
    tmp_path: Path,
) -> None:
    store = await make_store(encryption=RING1)
    assert store.encryption is RING1 and "k1" in repr(store)
    info = await store.put("model.bin", DATA, chunk_size=1024, meta={"kind": "weights"})
    assert info.chunks == 11 and info.size == len(DATA) + 11 * 28  # what is stored
    assert info.headers == {ENC: ["v1;k1"]}
    assert await store.get_bytes("model.bin") == DATA
    async with store.open("model.bin") as reader:
        pieces = [chunk async for chunk in reader]
    assert b"".join(pieces) == DATA and all(len(p) <= 1024 for p in pieces)
    target = tmp_path / "model.bin"
    await store.get_file("model.bin", target)
    assert target.read_bytes() == DATA
    source = tmp_path / "source.bin"
    source.write_bytes(DATA[:3000])
    await store.put("from-path", source, chunk_size=1000)
    assert await store.get_bytes("from-path") == DATA[:3000]
    empty = await store.put("empty", b"")
    assert empty.chunks == 1 and empty.size == 28  # one sealed empty chunk
    assert await store.get_bytes("empty") == b""
    await store.add_link("alias", "model.bin")
    assert await store.get_bytes("alias") == DATA
    await store.update_meta("model.bin", new_name="renamed.bin")  # the chunks keep their nuid
    assert await store.get_bytes("renamed.bin") == DATA

    # The server holds no plaintext; a peer reads the sealed bytes and verifies their digest.
    for message in await _chunks(js, store, info.nuid):
        assert message.headers[ENC] == "v1;k1"
        assert DATA[:64] not in message.data and len(message.data) <= 1024 + 28
    obs = await peer.object_store(store.name)
    result = await obs.get("renamed.bin")
    assert result.data is not None and len(result.data) == info.size and result.data != DATA
    assert result.info.headers is not None and result.info.headers.get(ENC) == ["v1;k1"]


async def test_each_rearrangement_of_chunks_raises_a_typed_error(
    js: jetstream.JetStream, make_store: StoreFactory
) -> None:
    store = await make_store(encryption=RING1)
    other = await make_store(encryption=RING1)

    async def fresh(name: str, data: bytes = DATA) -> list[tuple[bytes, dict[str, str]]]:
        info = await store.put(name, data, chunk_size=1024)
        return [(m.data, m.headers) for m in await _chunks(js, store, info.nuid)]

    async def refused(name: str, error: type[DecryptionError] = DecryptionError) -> None:
        with pytest.raises(error) as raised:
            await store.get_bytes(name)
        assert raised.value.key == name

    chunks = await fresh("flip")
    flipped = bytearray(chunks[3][0])
    flipped[40] ^= 1
    await _forge(js, store, "flip", [*chunks[:3], (bytes(flipped), chunks[3][1]), *chunks[4:]])
    await refused("flip")
    chunks = await fresh("reorder")
    await _forge(js, store, "reorder", [chunks[1], chunks[0], *chunks[2:]])
    await refused("reorder")
    chunks = await fresh("drop")
    await _forge(js, store, "drop", [chunks[0], *chunks[2:]])
    await refused("drop")
    chunks = await fresh("truncate")
    await _forge(js, store, "truncate", chunks[:-1])  # a shorter object, all chunks genuine
    await refused("truncate")
    await _forge(js, store, "truncate", [])  # no chunks at all: not an empty object
    await refused("truncate")
    await fresh("mine", b"A" * 3000)
    theirs = await fresh("theirs", b"B" * 3000)
    await _forge(js, store, "mine", theirs)  # another object's chunks under this nuid
    await refused("mine")
    # the same chunks under their own nuid, copied to another store
    chunks = await fresh("copied")
    await other.put("copied", b"placeholder")
    await _forge(js, other, "copied", chunks)
    with pytest.raises(DecryptionError):
        await other.get_bytes("copied")
    # a plain object in an encrypted store: refused unless allow_plaintext
    plain = await objstore.open_store(js, store.name)
    await plain.put("plain", b"plain bytes")
    await plain.put("plain-empty", b"")
    await refused("plain", PlaintextValueError)
    await refused("plain-empty", PlaintextValueError)
    migrating = await objstore.open_store(js, store.name, encryption=RING1, allow_plaintext=True)
    assert await migrating.get_bytes("plain") == b"plain bytes"
    assert await migrating.get_bytes("plain-empty") == b""
    assert await migrating.get_bytes("copied") == DATA
    # one plain chunk among sealed ones: refused even with allow_plaintext
    chunks = await fresh("mixed")
    await _forge(js, store, "mixed", [*chunks[:-1], (b"tail", {})])
    with pytest.raises(DecryptionError):
        await migrating.get_bytes("mixed")


async def test_rotation_wrong_and_unknown_keys(
    js: jetstream.JetStream, make_store: StoreFactory
) -> None:
    store = await make_store(encryption=RING1)
    await store.put("old", DATA, chunk_size=4096)
    rotated = await objstore.open_store(js, store.name, encryption=RING12)
    await rotated.put("new", DATA[:100])
    assert await rotated.get_bytes("old") == DATA  # reads accept every key of the ring
    assert (await rotated.info("new")).headers == {ENC: ["v1;k2"]}
    with pytest.raises(UnknownKeyIdError) as unknown:
        await store.get_bytes("new")
    assert unknown.value.key_id == "k2"
    wrong = await objstore.open_store(js, store.name, encryption=Keyring({"k1": K2}, primary="k1"))
    with pytest.raises(DecryptionError) as raised:
        await wrong.get_bytes("old")
    assert type(raised.value) is DecryptionError


async def test_bad_store_encryption_options_are_refused_before_anything_is_sent(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("os")
    for options in ({"encryption": "k1"}, {"allow_plaintext": True}):
        with pytest.raises(jetstream.ClientValidationError):
            await objstore.create_store(js, name, **options)  # type: ignore[arg-type]
        with pytest.raises(jetstream.ClientValidationError):
            await objstore.open_store(js, name, **options)  # type: ignore[arg-type]
    assert name not in [n async for n in objstore.list_stores(js)]


async def _gate_reupload(
    monkeypatch: pytest.MonkeyPatch, before: Callable[[int, str], Awaitable[None]]
) -> None:
    """Run ``before(n, name)`` ahead of the n-th object rekey rewrites (a client-side hook)."""
    original = objstore._rekey._reupload
    calls = 0

    async def gated(store: objstore.ObjectStore, record: Any) -> jetstream.RekeyReport:
        nonlocal calls
        calls += 1
        await before(calls, record.info.name)
        return await original(store, record)

    monkeypatch.setattr(objstore._rekey, "_reupload", gated)


async def test_store_rotation_then_rekey_interrupted_and_resumed(
    js: jetstream.JetStream,
    make_store: StoreFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = await make_store(encryption=RING1)
    contents = {f"o{i}": DATA[: 1000 * (i + 1)] for i in range(5)}
    for name, data in contents.items():
        await store.put(name, data, chunk_size=1024)
    await store.put("empty", b"")
    await store.put("ttl", b"t" * 100, ttl="1h")
    contents |= {"empty": b"", "ttl": b"t" * 100}
    await store.add_link("link", "o1")
    old_nuids = [(await store.info(name)).nuid for name in contents]
    rotated = await objstore.open_store(js, store.name, encryption=RING12)
    await rotated.put("fresh", b"new")
    contents["fresh"] = b"new"

    stuck = asyncio.Event()

    async def block_after_3(n: int, name: str) -> None:
        if n > 3:
            stuck.set()
            await asyncio.Event().wait()

    await _gate_reupload(monkeypatch, block_after_3)
    task = asyncio.create_task(rotated.rekey())
    await asyncio.wait_for(stuck.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    monkeypatch.undo()

    key_ids = {name: (await rotated.info(name)).headers for name in contents}
    moved = [name for name, headers in key_ids.items() if headers == {ENC: ["v1;k2"]}]
    assert len(moved) == 3 + 1  # three rekeyed before the interruption, and "fresh"
    for name, data in contents.items():
        assert await rotated.get_bytes(name) == data  # every object reads, midway
    report = await rotated.rekey()
    assert report == jetstream.RekeyReport(rekeyed=len(contents) - 4, current=4)
    only_new = await objstore.open_store(js, store.name, encryption=RING2)
    for name, data in contents.items():
        assert await only_new.get_bytes(name) == data
    assert await only_new.get_bytes("link") == contents["o1"]
    for nuid in old_nuids:
        assert await _chunks(js, store, nuid) == []  # the old chunks went with their records
    meta = await js.get_last_message(store.stream, meta_subject(store.name, "ttl"))
    assert jetstream.headers.TTL in meta.headers  # what was left of its TTL was kept
    assert await only_new.rekey() == jetstream.RekeyReport(current=len(contents))


async def test_store_rekey_never_overwrites_a_concurrent_put(
    js: jetstream.JetStream,
    make_store: StoreFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = await make_store(encryption=RING1)
    await store.put("hot", DATA, chunk_size=1024)
    await store.put("cold", b"cold")
    writer = await objstore.open_store(js, store.name, encryption=RING1)  # an old program

    original = objstore._upload.write_record

    async def put_first(
        store: objstore.ObjectStore, info: objstore.ObjectInfo, *args: Any, **kwargs: Any
    ) -> int:
        if info.name == "hot":  # every chunk re-sealed; their put lands before our commit
            await writer.put("hot", b"theirs")
        return await original(store, info, *args, **kwargs)

    monkeypatch.setattr(objstore._upload, "write_record", put_first)
    rotated = await objstore.open_store(js, store.name, encryption=RING12)
    assert await rotated.rekey() == jetstream.RekeyReport(rekeyed=1, changed=1)
    assert await rotated.get_bytes("hot") == b"theirs"  # their write was kept
    assert (await rotated.info("hot")).headers == {ENC: ["v1;k1"]}
    assert await rotated.get_bytes("cold") == b"cold"
    assert await rotated.cleanup(older_than=timedelta(0)) == 0  # no orphaned chunks left
    monkeypatch.undo()
    assert await rotated.rekey() == jetstream.RekeyReport(rekeyed=1, current=1)


async def test_store_rekey_migrates_plain_objects(
    js: jetstream.JetStream, make_store: StoreFactory
) -> None:
    plain = await make_store()
    await plain.put("a", b"plain a")
    await plain.put("b", b"")
    strict = await objstore.open_store(js, plain.name, encryption=RING1)
    assert await strict.rekey() == jetstream.RekeyReport(skipped=2)
    migrating = await objstore.open_store(js, plain.name, encryption=RING1, allow_plaintext=True)
    assert await migrating.rekey() == jetstream.RekeyReport(rekeyed=2)
    assert await strict.get_bytes("a") == b"plain a" and await strict.get_bytes("b") == b""
    with pytest.raises(jetstream.ClientValidationError):
        await plain.rekey()


async def _put_with_largest_meta(store: objstore.ObjectStore, name: str, data: bytes) -> None:
    """``name`` with metadata as large as its record allows (found by bisection)."""
    fits, too_big = 0, store.js.nc.max_payload
    while too_big - fits > 1:
        size = (fits + too_big) // 2
        try:
            await store.put(name, data, meta={"m": "x" * size})
            fits = size
        except jetstream.ValueTooLargeError:
            too_big = size
    await store.put(name, data, meta={"m": "x" * fits})


async def test_rekey_skips_an_object_whose_record_would_outgrow_max_payload(
    js: jetstream.JetStream, make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """A record at the size limit grows when the key id written into it gets longer: rekey()
    raised UploadFailedError at that object on every run (after uploading it whole), and
    never reached the objects after it."""
    store = await make_store(encryption=RING1)
    await _put_with_largest_meta(store, "a-full-record", DATA[:5000])
    await store.put("z-ordinary", DATA[:3000])
    long_id = "k2-" + "x" * 61  # the longest key id: 62 more bytes in the record
    ring = Keyring({"k1": K1, long_id: K2}, primary=long_id)
    rotated = await objstore.open_store(js, store.name, encryption=ring)
    report = await rotated.rekey()
    assert (report.skipped, report.rekeyed) == (1, 1)
    assert "a-full-record" in caplog.text and "would not fit" in caplog.text
    assert await rotated.get_bytes("a-full-record") == DATA[:5000], "still read with k1"
    assert await rotated.get_bytes("z-ordinary") == DATA[:3000]
    assert (await rotated.rekey()).skipped == 1, "skipped again, not failing, on the next run"


async def test_a_record_too_large_is_refused_before_any_chunk_is_read_or_sent(
    js: jetstream.JetStream, make_store: StoreFactory
) -> None:
    store = await make_store()
    read = 0

    async def source() -> Any:
        nonlocal read
        for _ in range(64):
            read += 1
            yield b"z" * 1024 * 1024

    meta = {"m": "x" * js.nc.max_payload}
    with pytest.raises(jetstream.ValueTooLargeError, match="meta record of object 'big'"):
        await store.put("big", source(), meta=meta)
    assert read == 0, "the object was not read, nor its 64 MiB sent, to learn that"
    info = await js.stream_info(store.stream)
    assert info.state.messages == 0


async def test_encrypted_objects_are_checked_by_their_tags_and_plain_ones_by_the_digest(
    js: jetstream.JetStream, make_store: StoreFactory
) -> None:
    """A download of an encrypted object does not hash it: each chunk's tag authenticates its
    bytes and its place, so a record's digest adds nothing (a forger recomputes it). A plain
    object in an encrypted store (allow_plaintext) has only the digest, and it is checked."""
    store = await make_store(encryption=RING1)
    await store.put("sealed", DATA, chunk_size=1024)
    info = await store.info("sealed")
    wrong = msgspec.structs.replace(info, digest="SHA-256=" + "A" * 43 + "=")
    await js.publish(
        meta_subject(store.name, "sealed"),
        msgspec.json.encode(wrong),
        headers={jetstream.headers.ROLLUP: "sub"},
    )
    assert await store.get_bytes("sealed") == DATA, "authentic chunks, whatever the record says"

    plain_store = await objstore.open_store(js, store.name)  # no keyring: writes plain objects
    await plain_store.put("plain", DATA, chunk_size=1024)
    migrating = await objstore.open_store(js, store.name, encryption=RING1, allow_plaintext=True)
    assert await migrating.get_bytes("plain") == DATA
    info = await store.info("plain")
    await js.publish(
        meta_subject(store.name, "plain"),
        msgspec.json.encode(msgspec.structs.replace(info, digest=wrong.digest)),
        headers={jetstream.headers.ROLLUP: "sub"},
    )
    with pytest.raises(objstore.DigestMismatchError):
        await migrating.get_bytes("plain")


async def test_new_headers_keep_the_encryption_marker_peers_read(make_store: StoreFactory) -> None:
    """helper-38: update_meta(headers=...) replaced the record's headers whole, so the
    ``Jetstore-Enc`` marker telling peers the chunks are ciphertext disappeared."""
    store = await make_store(encryption=RING1)
    await store.put("o", DATA[:100])
    info = await store.update_meta("o", headers={"H": ["v"]})
    assert info.headers == {"H": ["v"], ENC: ["v1;k1"]}
    assert (await store.info("o")).headers == {"H": ["v"], ENC: ["v1;k1"]}
    assert await store.get_bytes("o") == DATA[:100]


OPENER = Keyring({"k1": K1}, primary="k1")  # another ring with the same key: a reader


async def test_object_chunks_are_envelope_v1_and_the_digest_covers_them(
    js: jetstream.JetStream, unique_name: Callable[[str], str], peer: JetStreamContext
) -> None:
    name = unique_name("os")
    store = await objstore.create_store(js, name, encryption=RING1)
    try:
        data = bytes(range(256)) * 40 + b"tail"  # 10 chunks of 1024 and one of 4
        info = await store.put("o", data, chunk_size=1024)
        assert info.chunks == 11
        sub = await peer.subscribe(chunk_subject(name, info.nuid), ordered_consumer=True)
        sha = hashlib.sha256()
        plain = b""
        for index in range(info.chunks):
            msg = await sub.next_msg(timeout=5)
            sha.update(msg.data)
            last = index == info.chunks - 1
            assert (msg.headers or {})[ENC] == "v1;k1"
            ad = chunk_associated_data(name, info.nuid, index, last)
            plain += OPENER.open((msg.headers or {})[ENC], msg.data, ad)
        await sub.unsubscribe()
        assert plain == data
        assert info.digest == "SHA-256=" + base64.urlsafe_b64encode(sha.digest()).decode()
        assert info.size == len(data) + 11 * 28
        assert await store.get_bytes("o") == data
    finally:
        await objstore.delete_store(js, name)
