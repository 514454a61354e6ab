"""Meta records written by a hostile peer (issue 11, findings 4 and 5): a record whose nuid,
sizes, names or link targets lie is refused before any of them reaches a subject or a size;
reads of records whose chunks are missing or whose links loop end with a typed error, fast.

Records are planted as a peer with publish rights on the store would: raw ADR-20 JSON
published with nats-py to ``$O.<store>.M.<base64url(name)>`` with ``Nats-Rollup: sub``."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from nats.js import JetStreamContext

import jetstream
import objstore
from jetstream._consume.scan import scan_stream
from objstore import ObjectStore
from objstore._download import MAX_WINDOW_MESSAGES, window_messages
from objstore._trust import is_literal_token

CHUNK = 1024
PROMPT = 5.0  # seconds: any end must come well before the 30 s stall timeout
PROVABLE = 0.5  # seconds: an end the server's counts prove comes before the 1 s idle check
TRIALS = 5


def _meta_subject(store: str, name: str) -> str:
    return f"$O.{store}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"


async def _plant(peer: JetStreamContext, store: str, at: str, **fields: Any) -> None:
    """A meta record on the subject of ``at`` as a peer writes it; ``fields`` override an
    honest one's."""
    record: dict[str, Any] = {
        "name": at,
        "bucket": store,
        "nuid": "PeerNuid0123456789abcd",
        "size": 3 * CHUNK,
        "chunks": 3,
        "mtime": "2026-01-01T00:00:00Z",
        "digest": "SHA-256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=",
        "options": {"max_chunk_size": CHUNK},
    }
    record.update(fields)
    await peer.publish(
        _meta_subject(store, at), json.dumps(record).encode(), headers={"Nats-Rollup": "sub"}
    )


def _link(store: str, name: str = "") -> dict[str, Any]:
    """A link record's fields as nats.go AddLink writes them."""
    link = {"bucket": store, "name": name} if name else {"bucket": store}
    return {"size": 0, "chunks": 0, "digest": "", "options": {"link": link}}


async def _chunk_counts(js: jetstream.JetStream, store: ObjectStore) -> Counter[str]:
    counts: Counter[str] = Counter()
    async for message in scan_stream(
        js, store.stream, [f"$O.{store.name}.C.>"], last_per_subject=False, headers_only=True
    ):
        counts[message.subject.rsplit(".", 1)[1]] += 1
    return counts


async def _two_objects(store: ObjectStore) -> dict[str, bytes]:
    contents = {"a": b"A" * (3 * CHUNK), "b": b"B" * (2 * CHUNK + 5)}
    for name, data in contents.items():
        await store.put(name, data, chunk_size=CHUNK)
    return contents


# -- finding 4: fields reaching a subject or a size are validated ------------------------------

HOSTILE: dict[str, dict[str, Any]] = {
    "nuid >": {"nuid": ">"},
    "nuid *": {"nuid": "*"},
    "nuid with dots": {"nuid": "x.>"},
    "nuid with a space": {"nuid": "a b"},
    "nuid with a tab": {"nuid": "a\tb"},
    "nuid empty with chunks": {"nuid": ""},
    "size negative": {"size": -5},
    "chunks negative": {"chunks": -1},
    "size without chunks": {"size": 10, "chunks": 0},
    "chunks without size": {"size": 0, "chunks": 3},
    "more chunks than bytes": {"size": 2, "chunks": 5},
    "chunk size negative": {"options": {"max_chunk_size": -1}},
    "another store's bucket": {"bucket": "elsewhere"},
    "wildcard bucket": {"bucket": "*"},
    "another object's name": {"name": "a"},
    "link into a wildcard store": {"options": {"link": {"bucket": ">", "name": "a"}}},
    "link into a dotted store": {"options": {"link": {"bucket": "x.y", "name": "a"}}},
    "link with no store": {"options": {"link": {"name": "a"}}},
}


@pytest.mark.parametrize("fields", HOSTILE.values(), ids=HOSTILE.keys())
async def test_a_hostile_record_is_refused_and_touches_nothing_else(
    store: ObjectStore,
    js: jetstream.JetStream,
    peer: JetStreamContext,
    caplog: pytest.LogCaptureFixture,
    fields: dict[str, Any],
) -> None:
    """A nuid of ``>`` made ``delete`` purge ``$O.<store>.C.>`` (every object's chunks) and
    made reads subscribe to every object's chunks."""
    contents = await _two_objects(store)
    before = await _chunk_counts(js, store)
    await _plant(peer, store.name, "evil", **fields)

    with pytest.raises(objstore.InvalidObjectMetaError):
        await store.info("evil")
    with pytest.raises(objstore.InvalidObjectMetaError):
        await store.get_bytes("evil")
    with pytest.raises(objstore.InvalidObjectMetaError):
        await store.update_meta("evil", description="x")
    caplog.set_level(logging.WARNING, logger="objstore")
    assert {i.name async for i in store.list()} == {"a", "b"}
    assert any("evil" in r.getMessage() or "ZXZpbA" in r.getMessage() for r in caplog.records)
    assert await store.cleanup(older_than=timedelta(0)) == 0

    await store.delete("evil")  # the record goes; nothing is purged on its word
    with pytest.raises(objstore.ObjectNotFoundError):
        await store.info("evil")
    assert await _chunk_counts(js, store) == before, "other objects' chunks intact"
    for name, data in contents.items():
        assert await store.get_bytes(name) == data


async def test_a_wildcard_nuid_is_never_a_reader_filter(
    store: ObjectStore, js: jetstream.JetStream, peer: JetStreamContext
) -> None:
    """With ``"nuid": "*"`` and a's size, a read of the planted name delivered a's chunks."""
    contents = await _two_objects(store)
    real = await store.info("a")
    await _plant(
        peer, store.name, "spy", nuid="*", size=real.size, chunks=real.chunks, digest=real.digest
    )
    with pytest.raises(objstore.InvalidObjectMetaError, match="nuid"):
        await store.get_bytes("spy")
    assert await store.get_bytes("a") == contents["a"]


async def test_watch_skips_a_hostile_record(
    store: ObjectStore, peer: JetStreamContext, caplog: pytest.LogCaptureFixture
) -> None:
    await _two_objects(store)
    await _plant(peer, store.name, "evil", nuid=">")
    await store.put("c", b"after the hostile record")
    caplog.set_level(logging.WARNING, logger="objstore")
    seen: list[str] = []

    async def watch() -> None:
        async for info in store.watch():
            seen.append(info.name)
            if info.name == "c":
                return

    await asyncio.wait_for(watch(), 10)
    assert sorted(seen) == ["a", "b", "c"]
    assert any("unreadable meta record" in r.getMessage() for r in caplog.records)


async def test_valid_peer_records_still_read(store: ObjectStore, peer: JetStreamContext) -> None:
    """The checks refuse only what no ADR-20 writer produces: nats.js link records without a
    nuid, empty objects, tombstones and nats.go links stay readable."""
    await store.put("target", b"T" * (CHUNK + 1), chunk_size=CHUNK)
    await _plant(peer, store.name, "go-link", **_link(store.name, "target"))
    await peer.publish(
        _meta_subject(store.name, "js-link"),
        json.dumps(
            {"name": "js-link", "bucket": store.name, "options": {"link": _link_of(store.name)}}
        ).encode(),
    )
    await _plant(peer, store.name, "empty", size=0, chunks=0, digest="")
    await _plant(peer, store.name, "gone", size=0, chunks=0, deleted=True, digest="", mtime="")
    assert await store.get_bytes("go-link") == b"T" * (CHUNK + 1)
    assert await store.get_bytes("js-link") == b"T" * (CHUNK + 1)
    assert (await store.info("empty")).size == 0
    with pytest.raises(objstore.ObjectNotFoundError):
        await store.info("gone")
    names = {i.name async for i in store.list(include_deleted=True)}
    assert names == {"target", "go-link", "js-link", "empty", "gone"}


def _link_of(store: str) -> dict[str, str]:
    return {"bucket": store, "name": "target"}


# -- finding 5: reads end, promptly where the end is provable ----------------------------------


async def _plant_chunks(js: jetstream.JetStream, store: str, nuid: str, count: int) -> None:
    for i in range(count):
        await js.publish(f"$O.{store}.C.{nuid}", bytes([i]) * CHUNK)


async def _timed(call: Callable[[], Any]) -> float:
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.wait_for(call(), 25)
    return loop.time() - started


async def _time_failure(call: Callable[[], Awaitable[bytes]], match: str) -> float:
    """Seconds until ``call`` fails with the DigestMismatchError it must end with."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(objstore.DigestMismatchError, match=match):
        await asyncio.wait_for(call(), 25)
    return loop.time() - started


async def _provably_short_reads(read: Callable[[int], Awaitable[float]]) -> None:
    """The end is provable from the server's counts (nothing pending, no next chunk): reads
    end at once, not after the reader's 1 s idle check (which they waited for before).
    Median of several trials, so one scheduling hiccup on a busy machine does not count."""
    times = sorted([await read(i) for i in range(TRIALS)])
    assert times[TRIALS // 2] < PROVABLE, times
    assert times[-1] < PROMPT, times


async def test_a_record_promising_more_chunks_than_stored_ends_promptly(
    store: ObjectStore, js: jetstream.JetStream, peer: JetStreamContext
) -> None:
    async def read(i: int) -> float:
        await _plant_chunks(js, store.name, f"ShortNuid{i}", 3)
        await _plant(peer, store.name, f"short{i}", nuid=f"ShortNuid{i}", size=8 * CHUNK, chunks=8)
        return await _time_failure(lambda: store.get_bytes(f"short{i}"), "3 of 8")

    await _provably_short_reads(read)


async def test_a_record_whose_chunks_are_gone_ends_promptly(
    store: ObjectStore, js: jetstream.JetStream
) -> None:
    async def read(i: int) -> float:
        info = await store.put(f"x{i}", b"x" * (4 * CHUNK), chunk_size=CHUNK)
        await js.purge_stream(store.stream, subject=f"$O.{store.name}.C.{info.nuid}")
        return await _time_failure(lambda: store.get_bytes(f"x{i}"), "0 of 4")

    await _provably_short_reads(read)


async def test_a_negative_chunk_count_is_refused_before_reading(
    store: ObjectStore, js: jetstream.JetStream, peer: JetStreamContext
) -> None:
    await _plant_chunks(js, store.name, "NegNuid", 2)
    await _plant(peer, store.name, "neg", nuid="NegNuid", size=2 * CHUNK, chunks=-1)

    async def read() -> None:
        with pytest.raises(objstore.InvalidObjectMetaError, match="chunks"):
            await store.get_bytes("neg")

    assert await _timed(read) < PROMPT


async def test_more_bytes_than_the_record_promises_fail_at_once(
    store: ObjectStore, js: jetstream.JetStream, peer: JetStreamContext
) -> None:
    """A record claiming 2 small chunks over large stored ones: the read fails as soon as
    the bytes exceed the record's size, not after buffering everything."""
    for _ in range(2):
        await js.publish(f"$O.{store.name}.C.BigNuid", b"z" * (64 * CHUNK))
    await _plant(peer, store.name, "big", nuid="BigNuid", size=2, chunks=2)
    async with store.open("big") as reader:
        with pytest.raises(objstore.DigestMismatchError, match="more than"):
            async for _chunk in reader:
                pass
        assert reader._received == 1


async def test_a_link_loop_is_a_typed_error(store: ObjectStore, peer: JetStreamContext) -> None:
    """``A -> B -> A`` read as empty bytes."""
    await _plant(peer, store.name, "A", **_link(store.name, "B"))
    await _plant(peer, store.name, "B", **_link(store.name, "A"))
    with pytest.raises(objstore.ObjectLinkError, match="loop") as raised:
        await store.get_bytes("A")
    assert isinstance(raised.value, jetstream.JetStreamError)
    await _plant(peer, store.name, "self", **_link(store.name, "self"))
    with pytest.raises(objstore.ObjectLinkError, match="loop"):
        await store.get_bytes("self")


async def test_link_chains_are_followed_up_to_a_bound(
    store: ObjectStore,
    js: jetstream.JetStream,
    peer: JetStreamContext,
    unique_name: Callable[[str], str],
) -> None:
    """nats.go follows links recursively without a bound; we follow at most
    ``MAX_LINK_DEPTH`` links, across stores too."""
    other = await objstore.create_store(js, unique_name("other"))
    try:
        await other.put("target", b"far away")
        depth = objstore.MAX_LINK_DEPTH
        await _plant(peer, store.name, f"L{depth - 1}", **_link(other.name, "target"))
        for i in range(depth - 1):
            await _plant(peer, store.name, f"L{i}", **_link(store.name, f"L{i + 1}"))
        assert await store.get_bytes("L0") == b"far away", "a chain of MAX_LINK_DEPTH links"
        await _plant(peer, store.name, "L-1", **_link(store.name, "L0"))
        with pytest.raises(objstore.ObjectLinkError, match="more than"):
            await store.get_bytes("L-1")
        await _plant(peer, other.name, "back", **_link(store.name, "L-1"))
        await _plant(peer, store.name, "cross", **_link(other.name, "back"))
        with pytest.raises(objstore.ObjectLinkError):
            await store.get_bytes("cross")
    finally:
        await objstore.delete_store(js, other.name)


# -- the checks themselves, without a server ---------------------------------------------------


@pytest.mark.parametrize(
    ("token", "literal"),
    [
        ("PeerNuid0123456789abcd", True),
        ("a-b_c~!", True),
        ("", False),
        (">", False),
        ("*", False),
        ("a*", False),
        ("a.b", False),
        ("a b", False),
        ("a\x00b", False),
        ("a\nb", False),
        ("é", False),
    ],
)
def test_a_nuid_must_be_one_literal_token(token: str, literal: bool) -> None:
    assert is_literal_token(token) is literal


@pytest.mark.parametrize(
    ("size", "chunks", "max_chunk_size", "messages"),
    [
        (10 * 128 * 1024, 10, 128 * 1024, 64),  # every client's default chunk size
        (1000, 1000, 1, MAX_WINDOW_MESSAGES),  # a record claiming 1-byte chunks
        (1000, 1000, 0, MAX_WINDOW_MESSAGES),
        (64 * 1024 * 1024, 8, 8 * 1024 * 1024, 2),
        (0, 0, 0, 64),
    ],
)
def test_the_read_window_is_bounded_whatever_the_record_claims(
    size: int, chunks: int, max_chunk_size: int, messages: int
) -> None:
    info = objstore.ObjectInfo(
        name="x",
        bucket="s",
        nuid="n",
        size=size,
        mtime=None,
        chunks=chunks,
        options=objstore.ObjectMetaOptions(max_chunk_size=max_chunk_size),
    )
    assert window_messages(info) == messages


async def test_infos_built_by_callers_are_checked_too(store: ObjectStore) -> None:
    """An ObjectInfo from elsewhere (deserialised, forged) reaches no subject unchecked."""
    real = await store.put("real", b"R" * CHUNK)
    forged = objstore.ObjectInfo(
        name="real", bucket=">", nuid=real.nuid, size=real.size, mtime=None, chunks=1
    )
    with pytest.raises(jetstream.InvalidBucketNameError):
        await store.add_link("to-forged", forged)
    with pytest.raises(objstore.ObjectNotFoundError):
        await store.info("to-forged")  # nothing written
    wild = objstore.ObjectInfo(name="w", bucket=store.name, nuid=">", size=1, mtime=None, chunks=1)
    with pytest.raises(objstore.InvalidObjectMetaError, match="nuid"):
        objstore.ObjectReader(store, wild)


DEEP = 20_000  # nesting levels: far beyond any recursion limit, 160 kB (under max_payload)


def _deeply_nested() -> bytes:
    """A JSON object whose unknown field nests ``DEEP`` objects (decoders skipping it
    recurse once per level)."""
    return b'{"name":"deep","x":' + b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"}"


async def test_a_deeply_nested_meta_record_is_refused_not_a_recursion_error(
    store: ObjectStore, peer: JetStreamContext, caplog: pytest.LogCaptureFixture
) -> None:
    await store.put("honest.bin", b"h" * 100)
    await peer.publish(
        _meta_subject(store.name, "deep"), _deeply_nested(), headers={"Nats-Rollup": "sub"}
    )
    with caplog.at_level(logging.WARNING, logger="objstore"):
        assert [info.name async for info in store.list()] == ["honest.bin"]
        with pytest.raises(objstore.InvalidObjectMetaError):
            await store.info("deep")
        with pytest.raises(objstore.InvalidObjectMetaError):
            await store.get_bytes("deep")
        assert await store.cleanup(older_than=timedelta(0)) == 0  # unreadable: nothing removed
        await store.delete("deep")  # the record is replaced by a tombstone
    assert "deep" in caplog.text
    with pytest.raises(objstore.ObjectNotFoundError):
        await store.info("deep")
    assert await store.get_bytes("honest.bin") == b"h" * 100


async def test_long_names_in_records_never_cost_the_connection(
    store: ObjectStore, peer: JetStreamContext
) -> None:
    """A request subject over the server's control line makes the server close the connection
    (nats-py then gives up for good). A peer's link to a 6000-character name, or a record with
    a 5000-character nuid, did that to every reader: a 5 s timeout, then every later call
    failed with ConnectionClosedError."""
    await store.put("honest.bin", b"h" * 100)
    record = {"bucket": store.name, "size": 0, "chunks": 0, "mtime": "", "nuid": "N"}
    link = {"link": {"bucket": store.name, "name": "x" * 6000}}
    await peer.publish(
        _meta_subject(store.name, "long-link"),
        json.dumps({**record, "name": "long-link", "options": link}).encode(),
        headers={"Nats-Rollup": "sub"},
    )
    chunked = {**record, "name": "long-nuid", "nuid": "n" * 5000, "size": 1, "chunks": 1}
    await peer.publish(
        _meta_subject(store.name, "long-nuid"),
        json.dumps(chunked).encode(),
        headers={"Nats-Rollup": "sub"},
    )
    for name in ("long-link", "long-nuid", "y" * 6000):
        with pytest.raises(jetstream.JetStreamError) as refused:
            await asyncio.wait_for(store.get_bytes(name), 2.0)
        assert not isinstance(refused.value, jetstream.RequestTimeoutError)
        assert await store.get_bytes("honest.bin") == b"h" * 100, "the connection survived"
