"""Permission-limited users get PermissionDeniedError at once (not a timeout), with the
least-privilege templates of docs/RELIABILITY.md; custom inbox prefixes work everywhere."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

import jetstream
import kvstore
import objstore
from tests.security.permissions import kv_reader, kv_writer, object_uploader, server_config

FAST = 2.0  # seconds: far below the 5 s request timeout


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[jetstream.EmbeddedServer]:
    folder = tmp_path_factory.mktemp("secured")
    config = folder / "server.conf"
    config.write_text(
        server_config(
            {
                "admin": None,
                "reader": kv_reader("profiles"),
                "writer": kv_writer("profiles", "alice"),
                "uploader": object_uploader("files"),
                "private": kv_writer("profiles", "alice", inbox="_PRIVATE"),
                "private-reader": kv_reader("profiles", inbox="_PRIVATE"),
                "private-uploader": object_uploader("files", inbox="_PRIVATE"),
            }
        )
    )
    with jetstream.EmbeddedServer(
        store_dir=folder / "store", extra_args=["-c", str(config)]
    ) as server:
        jetstream.run_sync(lambda: _prepare(server))
        yield server


def url(server: jetstream.EmbeddedServer, user: str) -> str:
    return f"nats://{user}:{user}-pw@127.0.0.1:{server.port}"


async def _prepare(server: jetstream.EmbeddedServer) -> None:
    async with await jetstream.connect(url(server, "admin")) as js:
        bucket = await kvstore.create_bucket(js, "profiles", history=3)
        await bucket.put("alice.name", b"Alice")
        await bucket.put("bob.name", b"Bob")
        await objstore.create_store(js, "files")
        await objstore.create_store(js, "other")


async def _fast_denial(call: object) -> jetstream.PermissionDeniedError:
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(jetstream.PermissionDeniedError) as denied:
        await call  # type: ignore[misc]
    assert loop.time() - started < FAST, "denied promptly, not after a timeout"
    return denied.value


async def test_writer_limited_to_a_key_prefix(secured: jetstream.EmbeddedServer) -> None:
    async with await jetstream.connect(url(secured, "writer")) as js:
        bucket = await kvstore.open_bucket(js, "profiles")
        await bucket.put("alice.city", b"Paris")
        assert (await bucket.get("alice.city")).value == b"Paris"
        error = await _fast_denial(bucket.put("bob.city", b"Rome"))
        assert error.subject == "$kv.profiles.bob.city"  # as nats-py reports it: lowercased
        await _fast_denial(bucket.put_many({"alice.zip": b"1", "bob.zip": b"2", "alice.x": b"3"}))
        await _fast_denial(bucket.put_many({"alice.a": b"1", "bob.b": b"2"}))
        with pytest.raises(kvstore.KeyNotFoundError):
            await bucket.get("alice.zip")  # nothing of the refused batches was stored
        await bucket.put_many({"alice.zip": b"75", "alice.phone": b"555"})


async def test_reader_reads_but_cannot_write(secured: jetstream.EmbeddedServer) -> None:
    async with await jetstream.connect(url(secured, "reader")) as js:
        bucket = await kvstore.open_bucket(js, "profiles")
        assert (await bucket.get("bob.name")).value == b"Bob"
        assert {"alice.name", "bob.name"} <= {k async for k in bucket.keys()}
        async with bucket.watch("bob.>") as watcher:
            async for entry in watcher:
                assert entry.key == "bob.name"
                break
        await _fast_denial(bucket.put("bob.name", b"x"))
        await _fast_denial(bucket.delete("alice.name"))


async def test_uploader_limited_to_one_store(secured: jetstream.EmbeddedServer) -> None:
    async with await jetstream.connect(url(secured, "uploader")) as js:
        store = await objstore.open_store(js, "files")
        await store.put("a.bin", b"x" * 300_000)
        assert len(await store.get_bytes("a.bin")) == 300_000
        with pytest.raises(jetstream.JetStreamError):  # cannot even look the other store up
            await objstore.open_store(js, "other")
        other = objstore.ObjectStore(js, "other")
        await _fast_denial(other.put("b.bin", b"y" * 300_000))


async def test_custom_inbox_prefix_for_requests_watches_and_uploads(
    secured: jetstream.EmbeddedServer,
) -> None:
    """Users who may only subscribe under ``_PRIVATE.>``: every reply inbox (requests, batch
    commits, watch pulls, fast-ingest flow control, downloads) must use the given prefix."""
    async with await jetstream.connect(url(secured, "private"), inbox_prefix="_PRIVATE") as js:
        bucket = await kvstore.open_bucket(js, "profiles")
        await bucket.put("alice.private", b"ok")
        assert (await bucket.get("alice.private")).value == b"ok"
        await bucket.put_many({"alice.p1": b"1", "alice.p2": b"2"})
    reader_url = url(secured, "private-reader")
    async with await jetstream.connect(reader_url, inbox_prefix="_PRIVATE") as js:
        bucket = await kvstore.open_bucket(js, "profiles")
        async with bucket.watch("alice.private") as watcher:  # a consumer and its pulls
            entry = await anext(watcher)
        assert (entry.key, entry.value) == ("alice.private", b"ok")
        assert [e.value async for e in bucket.history("alice.name")] == [b"Alice"]
    uploader_url = url(secured, "private-uploader")
    async with await jetstream.connect(uploader_url, inbox_prefix="_PRIVATE") as js:
        store = await objstore.open_store(js, "files")
        data = bytes(range(256)) * 4096  # 1 MiB: several chunks, flow-controlled
        await store.put("private.bin", data, chunk_size=128 * 1024)
        assert await store.get_bytes("private.bin") == data
    async with await jetstream.connect(url(secured, "private")) as wrong_prefix:
        bucket = kvstore.Bucket(wrong_prefix, "profiles", kvstore.BucketConfig())
        error = await _fast_denial(bucket.put("alice.private", b"x"))
        assert "subscribe" in str(error) and "inbox" in str(error)


def test_permission_templates_are_valid_server_config(tmp_path: Path) -> None:
    config = tmp_path / "c.conf"
    config.write_text(
        server_config({"w": kv_writer("b", "p"), "r": kv_reader("b"), "u": object_uploader("s")})
    )
    with jetstream.EmbeddedServer(extra_args=["-c", str(config)]):
        pass  # the server refuses to start on an invalid configuration
