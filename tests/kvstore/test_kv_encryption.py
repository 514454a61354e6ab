"""Client-side encrypted buckets (``encryption=Keyring``) on a real server: every API round
trips, peers (nats-py) see ciphertext and plain tombstones, each tampering raises its typed
error, and rotation + ``rekey()`` (interrupted, then resumed) never loses or overwrites a value.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import msgspec
import nats
import pytest
from nats.js import JetStreamContext

import jetstream
import kvstore
from jetstream import (
    DecryptionError,
    Keyring,
    PlaintextValueError,
    RekeyReport,
    UnknownKeyIdError,
)
from jetstream._consume.scan import scan_stream
from kvstore import Base64KeyCodec, Op
from kvstore._encryption import value_associated_data
from tests.conftest import BucketFactory
from tests.docs.test_examples import EXAMPLES, _run
from tests.peer_reads import peer_keys

K1 = bytes(range(32))
K2 = bytes(range(64, 96))
RING1 = Keyring({"k1": K1}, primary="k1")
RING12 = Keyring({"k1": K1, "k2": K2}, primary="k2")
RING2 = Keyring({"k2": K2}, primary="k2")
ENC = jetstream.headers.ENCRYPTION


async def _stored(js: jetstream.JetStream, bucket: kvstore.Bucket) -> list[jetstream.StoredMessage]:
    """Every stored message of the bucket, as the server holds it."""
    return [
        m
        async for m in scan_stream(
            js, bucket.stream, [f"$KV.{bucket.name}.>"], last_per_subject=False
        )
    ]


async def _raw(
    js: jetstream.JetStream, bucket: kvstore.Bucket, key: str
) -> jetstream.StoredMessage:
    return await js.get_last_message(bucket.stream, f"$KV.{bucket.name}.{key}")


async def _key_ids(js: jetstream.JetStream, bucket: kvstore.Bucket) -> dict[str, str | None]:
    """The key id of each key's latest value."""
    found: dict[str, str | None] = {}
    async for m in scan_stream(js, bucket.stream, [f"$KV.{bucket.name}.>"]):
        header = m.headers.get(ENC)
        found[m.subject.split(".", 2)[2]] = None if header is None else header.split(";")[1]
    return found


async def test_every_api_round_trips_and_the_server_holds_only_ciphertext(
    js: jetstream.JetStream, make_bucket: BucketFactory, peer: JetStreamContext
) -> None:
    bucket = await make_bucket(history=5, encryption=RING1, marker_ttl=timedelta(seconds=1))
    assert bucket.encryption is RING1 and "k1" in repr(bucket)
    secrets = [b"alpha-secret", b"bravo-secret", b"charlie-secret", b"delta-secret"]
    first = await bucket.create("a", secrets[0])
    with pytest.raises(kvstore.KeyExistsError):
        await bucket.create("a", b"x")
    second = await bucket.update("a", secrets[1], first)
    assert (await bucket.get("a")).revision == second
    with pytest.raises(kvstore.WrongRevisionError):
        await bucket.update("a", b"x", first)
    assert (await bucket.get("a")).value == secrets[1]
    assert (await bucket.get("a", revision=first)).value == secrets[0]
    revisions = await bucket.put_many({"b": secrets[2], "c": secrets[3]}, expect={"b": 0})
    async with bucket.batch() as batch:
        batch.put("d", b"echo-secret")
        batch.update("c", b"foxtrot-secret", revisions["c"])
    await bucket.put("t", b"golf-secret", ttl="1h")
    snapshot = await bucket.get_many(["a", "b", "c", "d", "t", "none"])
    assert {k: e.value for k, e in snapshot.items()} == {
        "a": secrets[1],
        "b": secrets[2],
        "c": b"foxtrot-secret",
        "d": b"echo-secret",
        "t": b"golf-secret",
    }
    assert snapshot["t"].ttl == 3600 and snapshot.missing == ("none",)
    await bucket.delete("d")
    await bucket.purge("b")
    assert [(e.op, e.value) async for e in bucket.history("a")] == [
        (Op.PUT, secrets[0]),
        (Op.PUT, secrets[1]),
    ]
    assert [(e.op, e.value) async for e in bucket.history("d")] == [
        (Op.PUT, b"echo-secret"),
        (Op.DELETE, b""),
    ]
    assert sorted([k async for k in bucket.keys()]) == ["a", "c", "t"]
    async with bucket.watch(include_history=True) as watcher:
        seen = [(e.key, e.op, e.value) for e in [await anext(watcher) for _ in range(8)]]
    assert ("a", Op.PUT, secrets[0]) in seen and ("d", Op.DELETE, b"") in seen
    assert ("c", Op.PUT, b"foxtrot-secret") in seen
    async with bucket.watch("a", meta_only=True) as watcher:
        assert (await anext(watcher)).value == b""

    # The server holds ciphertext: no plaintext in any stored message, tombstones plain.
    plaintexts = [*secrets, b"echo-secret", b"foxtrot-secret", b"golf-secret", b"secret"]
    for message in await _stored(js, bucket):
        assert not any(p in message.data for p in plaintexts)
        if kvstore.Op.PUT is kvstore._models.op_from_headers(message.headers):
            assert message.headers[ENC] == "v1;k1"
        else:
            assert ENC not in message.headers and message.data == b""
    # ... and so does a peer: it reads the keys, tombstones and the sealed bytes.
    kv = await peer.key_value(bucket.name)
    assert sorted(await peer_keys(kv)) == ["a", "c", "t"]
    entry = await kv.get("a")
    assert entry.value is not None and secrets[1] not in entry.value
    assert len(entry.value) == len(secrets[1]) + 28  # nonce and tag
    raw = await peer.get_last_msg(bucket.stream, f"$KV.{bucket.name}.a")
    assert raw.headers is not None and raw.headers[ENC] == "v1;k1" and raw.data == entry.value
    with pytest.raises(nats.js.errors.KeyNotFoundError) as deleted:  # the tombstone, read
        await kv.get("d")
    assert deleted.value.op == "DEL"


async def test_typed_views_and_key_codecs_over_an_encrypted_bucket(
    js: jetstream.JetStream, make_bucket: BucketFactory
) -> None:
    class Profile(msgspec.Struct, frozen=True):
        name: str
        age: int

    plain = await make_bucket(history=3)
    bucket = await kvstore.open_bucket(js, plain.name, key_codec=Base64KeyCodec(), encryption=RING1)
    profiles = bucket.typed(Profile, format="msgpack")
    rev = await profiles.create("Acme Inc.alice", Profile("Alice", 30))
    await profiles.update("Acme Inc.alice", Profile("Alice", 31), rev)
    await profiles.put_many({"Acme Inc.bob": Profile("Bob", 7)})
    snapshot = await profiles.get_many(["Acme Inc.alice", "Acme Inc.bob"])
    assert snapshot["Acme Inc.alice"].value == Profile("Alice", 31)
    assert snapshot["Acme Inc.bob"].value == Profile("Bob", 7)
    assert [e.value async for e in profiles.history("Acme Inc.alice")] == [
        Profile("Alice", 30),
        Profile("Alice", 31),
    ]
    async with profiles.watch("Acme Inc.*") as watcher:
        assert {(await anext(watcher)).value for _ in range(2)} == {
            Profile("Alice", 31),
            Profile("Bob", 7),
        }
    stored = await _raw(js, bucket, "QWNtZSBJbmM.Ym9i")  # the stored (encoded) key
    assert stored.headers[ENC] == "v1;k1" and b"Bob" not in stored.data
    # a tampered value names the user key (its message the stored one); the last byte is
    # flipped, never set (a random tag ends in "!" once in 256 runs: nothing was tampered)
    tampered = stored.data[:-1] + bytes([stored.data[-1] ^ 1])
    await js.publish(stored.subject, tampered, headers={ENC: "v1;k1"})
    with pytest.raises(DecryptionError) as raised:
        await profiles.get("Acme Inc.bob")
    assert raised.value.key == "Acme Inc.bob" and "QWNtZSBJbmM.Ym9i" in str(raised.value)


async def _rewrite(
    peer: JetStreamContext, subject: str, data: bytes, headers: dict[str, str]
) -> None:
    """Store a message as a peer would (bypassing every client-side check), with the
    encryption header of ``headers`` (not the batch headers a stored message may carry)."""
    kept = {name: value for name, value in headers.items() if name == ENC}
    await peer.publish(subject, data, headers=kept or None)


async def test_each_tampering_raises_its_typed_error(
    js: jetstream.JetStream, make_bucket: BucketFactory, peer: JetStreamContext
) -> None:
    bucket = await make_bucket(history=5, encryption=RING12)
    other = await make_bucket(encryption=RING12)
    prefix = f"$KV.{bucket.name}."
    await bucket.put_many({"a": b"value of a", "b": b"value of b", "c": b"value of c"})
    a, b = await _raw(js, bucket, "a"), await _raw(js, bucket, "b")

    async def refused(key: str, error: type[DecryptionError]) -> DecryptionError:
        with pytest.raises(error) as raised:
            await bucket.get(key)
        assert raised.value.key == key and raised.value.revision is not None
        return raised.value

    # a flipped byte of the stored value (in the ciphertext, then in the nonce)
    for index in (len(a.data) // 2, 0):
        flipped = bytearray(a.data)
        flipped[index] ^= 0x40
        await _rewrite(peer, prefix + "a", bytes(flipped), a.headers)
        error = await refused("a", DecryptionError)
        assert type(error) is DecryptionError and error.key_id == "k2"
    # two values swapped between keys
    await _rewrite(peer, prefix + "a", b.data, b.headers)
    await _rewrite(peer, prefix + "b", a.data, a.headers)
    await refused("a", DecryptionError)
    await refused("b", DecryptionError)
    # a value copied to the same key of another bucket
    await _rewrite(peer, f"$KV.{other.name}.c", (await _raw(js, bucket, "c")).data, a.headers)
    with pytest.raises(DecryptionError):
        await other.get("c")
    assert (await bucket.get("c")).value == b"value of c"  # the original is fine
    # a header naming another key of the ring, or another format version
    c = await _raw(js, bucket, "c")
    for header in ("v1;k1", "v2;k2", "garbage"):
        await _rewrite(peer, prefix + "c", c.data, {ENC: header})
        await refused("c", DecryptionError)
    # the wrong key under the right key id, and a key id the ring does not have
    await bucket.put("d", b"value of d")
    wrong = await kvstore.open_bucket(js, bucket.name, encryption=Keyring({"k2": K1}, primary="k2"))
    with pytest.raises(DecryptionError) as raised:
        await wrong.get("d")
    assert type(raised.value) is DecryptionError
    unknown = await kvstore.open_bucket(js, bucket.name, encryption=RING1)
    with pytest.raises(UnknownKeyIdError) as missing:
        await unknown.get("d")
    assert missing.value.key_id == "k2" and missing.value.key == "d"
    # a plain value (written by a peer): refused unless allow_plaintext
    await _rewrite(peer, prefix + "p", b"plain text", {})
    with pytest.raises(PlaintextValueError):
        await bucket.get("p")
    migrating = await kvstore.open_bucket(js, bucket.name, encryption=RING12, allow_plaintext=True)
    assert (await migrating.get("p")).value == b"plain text"
    assert (await migrating.get("d")).value == b"value of d"  # encrypted ones still open
    with pytest.raises(DecryptionError):
        await migrating.get("a")  # allow_plaintext does not let tampered values through

    # every read path refuses: get_many, history, watch (and the watch goes on after it)
    with pytest.raises(DecryptionError):
        await bucket.get_many(["a", "d"])
    with pytest.raises(DecryptionError):
        [e async for e in bucket.history("a")]
    async with bucket.watch(["d", "a"]) as watcher:
        outcomes: list[Any] = []
        for _ in range(2):
            try:
                outcomes.append((await anext(watcher)).value)
            except DecryptionError as exc:
                outcomes.append(exc.key)
        assert sorted(map(str, outcomes)) == ["a", "b'value of d'"]
    with pytest.raises(DecryptionError):
        await bucket.typed(str).get("a")


class Profile(msgspec.Struct):
    name: str
    admin: bool


async def test_a_plain_value_with_a_msg_size_header_is_refused_on_every_read_path(
    js: jetstream.JetStream, make_bucket: BucketFactory, peer: JetStreamContext
) -> None:
    """A peer's plain value stored with a ``Nats-Msg-Size`` header (the header a headers-only
    delivery carries) was returned as if it had been decrypted by get, get_many, watch and
    typed views: a forged value over the real one."""
    bucket = await make_bucket(encryption=RING1)
    profiles = bucket.typed(Profile)
    await profiles.put("alice", Profile("Alice", admin=False))
    forged = msgspec.json.encode(Profile("Alice", admin=True))
    await peer.publish(f"$KV.{bucket.name}.alice", forged, headers={"Nats-Msg-Size": "1"})
    for read in (lambda: bucket.get("alice"), lambda: bucket.get_many(["alice"])):
        with pytest.raises(PlaintextValueError):
            await read()
    with pytest.raises(PlaintextValueError):
        await profiles.get("alice")
    async with bucket.watch() as watcher:
        with pytest.raises(PlaintextValueError):
            await asyncio.wait_for(anext(watcher), 10)
    async with bucket.watch(meta_only=True) as watcher:  # asked for no values: none opened
        entry = await asyncio.wait_for(anext(watcher), 10)
        assert (entry.key, entry.value, entry.op) == ("alice", b"", Op.PUT)


async def test_history_goes_on_after_a_revision_that_does_not_open(
    js: jetstream.JetStream, make_bucket: BucketFactory, peer: JetStreamContext
) -> None:
    """history() (bytes and typed) ended at a peer's plain revision: the revisions after it
    were never delivered (a watch already went on after such an error)."""
    bucket = await make_bucket(history=10, encryption=RING1)
    first = await bucket.put("k", b'"one"')
    await peer.publish(f"$KV.{bucket.name}.k", b"plain, written by a peer")
    last = await bucket.put("k", b'"three"')

    async def outcomes(history: Any) -> list[object]:
        seen: list[object] = []
        while True:
            try:
                entry = await anext(history)
            except StopAsyncIteration:
                return seen
            except PlaintextValueError as exc:
                seen.append(exc.revision)
            else:
                seen.append(entry.value)

    errors = first + 1
    assert await outcomes(bucket.history("k")) == [b'"one"', errors, b'"three"']
    assert await outcomes(bucket.typed(str).history("k")) == ["one", errors, "three"]
    assert last == errors + 1
    for listing in (bucket.history("k"), bucket.typed(str).history("k")):
        with pytest.raises(PlaintextValueError):
            await listing  # all of it or the error, and the listing stopped at once
        assert await js.consumer_names(bucket.stream) == []


async def test_bad_encryption_options_are_refused_before_anything_is_created(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> None:
    name = unique_name("kv")
    for options in (
        {"encryption": "k1"},
        {"encryption": {"k1": K1}},
        {"allow_plaintext": True},
    ):
        with pytest.raises(jetstream.ClientValidationError):
            await kvstore.create_bucket(js, name, **options)
        with pytest.raises(jetstream.ClientValidationError):
            await kvstore.open_bucket(js, name, **options)
    assert name not in [n async for n in kvstore.list_buckets(js)]
    plain = await kvstore.create_bucket(js, name)
    try:
        with pytest.raises(jetstream.ClientValidationError):
            await plain.rekey()
    finally:
        await kvstore.delete_bucket(js, name)


# -- rotation and rekey -----------------------------------------------------------------------


async def _connect(server: jetstream.EmbeddedServer) -> jetstream.JetStream:
    return await jetstream.connect(server.url)


def _gate_publish(
    js: jetstream.JetStream, before: Callable[[int, str], Awaitable[None]]
) -> list[str]:
    """Run ``before(n, subject)`` ahead of the n-th publish on ``js`` (a client-side hook; the
    server is real). Returns the subjects published so far."""
    original = js.publish
    subjects: list[str] = []

    async def publish(subject: str, data: bytes, **kwargs: Any) -> jetstream.PubAck:
        subjects.append(subject)
        await before(len(subjects), subject)
        return await original(subject, data, **kwargs)

    js.publish = publish  # type: ignore[method-assign]
    return subjects


async def test_rotation_then_rekey_interrupted_midway_and_resumed(
    js: jetstream.JetStream, make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer
) -> None:
    count = 300
    old = await make_bucket(history=2, encryption=RING1)
    values = {f"k.{i}": f"value {i}".encode() for i in range(count)}
    await old.put_many(dict(list(values.items())[:150]))
    await old.put_many(dict(list(values.items())[150:]))
    await old.put("ttl", b"short-lived", ttl="1h")
    await old.delete("k.0")  # tombstones are left alone
    values.pop("k.0")
    values["ttl"] = b"short-lived"

    # Rotate: new writes use k2, reads accept k1 and k2.
    rotated = await kvstore.open_bucket(js, old.name, encryption=RING12)
    for i in range(10):
        await rotated.put(f"new.{i}", b"new")
        values[f"new.{i}"] = b"new"
    assert (await _key_ids(js, rotated))["new.0"] == "k2"
    assert (await rotated.get("k.5")).value == b"value 5"

    # Interrupt a rekey midway: writes beyond the 100th wait forever, then it is cancelled.
    async with await _connect(nats_server) as js2:
        stuck = asyncio.Event()

        async def block_after_100(n: int, subject: str) -> None:
            if n > 100:
                stuck.set()
                await asyncio.Event().wait()

        _gate_publish(js2, block_after_100)
        interrupted = await kvstore.open_bucket(js2, old.name, encryption=RING12)
        task = asyncio.create_task(interrupted.rekey())
        await asyncio.wait_for(stuck.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    # Midway: some values moved to k2, some still under k1, and every value reads back.
    ids = await _key_ids(js, rotated)
    moved = sum(1 for key in values if ids[key] == "k2") - 10
    assert 1 <= moved <= 100 and ids["k.0"] is None  # the tombstone: plain
    snapshot = await rotated.get_many(list(values))
    assert {k: e.value for k, e in snapshot.items()} == values

    # Resume: it continues with what is left.
    report = await rotated.rekey()
    assert report == kvstore.RekeyReport(
        rekeyed=len(values) - 10 - moved, current=10 + moved, changed=0, skipped=0
    )
    assert all(
        key_id == "k2" for key, key_id in (await _key_ids(js, rotated)).items() if key != "k.0"
    )
    entry = await rotated.get("ttl")
    assert entry.ttl is not None and 3590 <= entry.ttl <= 3600  # what was left of its TTL
    # The old key can go: a ring with k2 alone reads every value.
    only_new = await kvstore.open_bucket(js, old.name, encryption=RING2)
    snapshot = await only_new.get_many(list(values))
    assert {k: e.value for k, e in snapshot.items()} == values
    assert await only_new.rekey() == kvstore.RekeyReport(current=len(values))


async def test_rekey_never_overwrites_a_concurrent_write(
    js: jetstream.JetStream, make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer
) -> None:
    bucket = await make_bucket(encryption=RING1)
    await bucket.put_many({"hot": b"old hot", "cold": b"old cold"})
    writer = await kvstore.open_bucket(js, bucket.name, encryption=RING1)  # an old program
    async with await _connect(nats_server) as js2:

        async def write_first(n: int, subject: str) -> None:
            if subject.endswith(".hot") and n <= 2:
                await writer.put("hot", b"theirs")  # lands between rekey's read and write

        _gate_publish(js2, write_first)
        rekeying = await kvstore.open_bucket(js2, bucket.name, encryption=RING12)
        report = await rekeying.rekey()
    assert report == kvstore.RekeyReport(rekeyed=1, changed=1)
    both = await kvstore.open_bucket(js, bucket.name, encryption=RING12)
    assert (await both.get("hot")).value == b"theirs"  # their write was kept
    assert (await both.get("cold")).value == b"old cold"
    assert await _key_ids(js, both) == {"hot": "k1", "cold": "k2"}
    assert await both.rekey() == kvstore.RekeyReport(rekeyed=1, current=1)  # run again


async def test_rekey_migrates_plain_values_and_skips_what_it_cannot_read(
    js: jetstream.JetStream, make_bucket: BucketFactory, peer: JetStreamContext
) -> None:
    plain = await make_bucket(history=3)
    await plain.put_many({f"p.{i}": f"plain {i}".encode() for i in range(5)})
    strict = await kvstore.open_bucket(js, plain.name, encryption=RING1)
    assert await strict.rekey() == kvstore.RekeyReport(skipped=5)  # plain: refused, untouched
    migrating = await kvstore.open_bucket(js, plain.name, encryption=RING1, allow_plaintext=True)
    assert await migrating.rekey() == kvstore.RekeyReport(rekeyed=5)
    for i in range(5):
        assert (await strict.get(f"p.{i}")).value == f"plain {i}".encode()
        assert b"plain" not in (await _raw(js, plain, f"p.{i}")).data
    await _rewrite(peer, f"$KV.{plain.name}.p.0", b"x" * 40, {ENC: "v1;k1"})  # tampered
    await _rewrite(peer, f"$KV.{plain.name}.p.1", b"x" * 40, {ENC: "v1;gone"})  # unknown key
    rotated = await kvstore.open_bucket(
        js, plain.name, encryption=Keyring({"k1": K1, "k2": K2}, primary="k2")
    )
    assert await rotated.rekey() == kvstore.RekeyReport(rekeyed=3, skipped=2)


def test_the_encrypted_example_rotates_and_refuses_a_moved_value() -> None:
    script = next(path for path in EXAMPLES if path.name == "encrypted.py")
    out = _run(script, {k: v for k, v in os.environ.items() if k != "NATS_URL"})
    assert "Keyring(key_ids=['2026-01'], primary='2026-01')" in out
    assert "stored: 'v1;2026-01'" in out and "hunter2'" in out
    assert "rekey: 3 values re-encrypted, 0 already current" in out
    assert "rekey again: 0 re-encrypted, 3 current" in out
    assert "a value copied to another key is refused: DecryptionError" in out


def test_the_encryption_benchmark_runs() -> None:
    root = EXAMPLES[0].parents[1]
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.encryption", "--keys", "10", "--rounds", "1",
         "--mib", "1", "--object-rounds", "1"],
        cwd=root, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    for row in ("put_many(10) | plain", "get_many(10) | encrypted", "object put 1 MiB"):
        assert row in result.stdout


async def test_rekey_skips_a_value_too_large_to_rewrite_and_rekeys_the_rest(
    js: jetstream.JetStream, make_bucket: BucketFactory
) -> None:
    """The largest value put() accepts no longer fits once the rewrite adds its
    compare-and-set header: rekey() raised ValueTooLargeError on every run, and the keys after
    it were never rekeyed."""
    bucket = await make_bucket(encryption=RING1)
    size = js.nc.max_payload
    while True:  # the largest value put() accepts
        try:
            await bucket.put("big", b"x" * size)
            break
        except jetstream.ValueTooLargeError:
            size -= 16
    await bucket.put_many({f"small{i}": b"s" for i in range(100)})
    rotated = await kvstore.open_bucket(js, bucket.name, encryption=RING12)
    for expected in (RekeyReport(rekeyed=100, skipped=1), RekeyReport(current=100, skipped=1)):
        assert await rotated.rekey() == expected  # resumable: the second run only counts
    ids = await _key_ids(js, rotated)
    assert ids.pop("big") == "k1" and set(ids.values()) == {"k2"}
    assert (await rotated.get("big")).value == b"x" * size  # readable with its old key


async def test_a_refused_rewrite_raises_our_error_not_an_exception_group(
    js: jetstream.JetStream, make_bucket: BucketFactory
) -> None:
    """rekey() writes concurrently; a failed write used to reach the caller wrapped in the
    TaskGroup's ExceptionGroup, which is outside the library's error tree."""
    bucket = await make_bucket(encryption=RING1)
    await bucket.put_many({f"k{i}": b"v" for i in range(5)})
    info = await js.stream_info(bucket.stream)
    await js.update_stream(msgspec.structs.replace(info.config, sealed=True))  # refuses writes
    rekeying = await kvstore.open_bucket(js, bucket.name, encryption=RING12)
    with pytest.raises(jetstream.JetStreamError):
        await rekeying.rekey()
    assert await _key_ids(js, rekeying) == {f"k{i}": "k1" for i in range(5)}  # nothing written


OPENER = Keyring({"k1": K1}, primary="k1")  # another ring with the same key: a reader


async def test_put_many_stores_envelope_v1_with_each_messages_own_headers(
    make_bucket: BucketFactory, peer: JetStreamContext
) -> None:
    bucket = await make_bucket(history=5, encryption=RING1, marker_ttl=timedelta(seconds=1))
    await bucket.put("c.3", b"old")
    items = {f"{group}.{i}": f"value {group}{i}".encode() for group in "abc" for i in range(4)}
    # Runs of equal headers and changes between them: plain, TTL'd, conditional.
    ttl = {"b.0": 60, "b.1": 60, "a.3": 120}
    expect = {"c.0": 0, "c.3": 1}
    revisions = await bucket.put_many(items, ttl=ttl, expect=expect)
    assert set(revisions) == set(items)
    snapshot = await bucket.get_many(items)
    assert {key: entry.value for key, entry in snapshot.items()} == items
    for key, value in items.items():
        raw = await peer.get_last_msg(bucket.stream, f"$KV.{bucket.name}.{key}")
        headers = dict(raw.headers or {})
        assert headers[ENC] == "v1;k1"
        assert value not in raw.data  # the peer sees ciphertext only
        ad = value_associated_data(bucket.name, key)
        assert OPENER.open(headers[ENC], raw.data, ad) == value
        assert headers.get("Nats-TTL") == (str(ttl[key]) if key in ttl else None)
        if key in expect:
            assert headers["Nats-Expected-Last-Subject-Sequence"] == str(expect[key])
        else:
            assert "Nats-Expected-Last-Subject-Sequence" not in headers
