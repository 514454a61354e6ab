"""The permission templates (``kvstore.*_permissions``, ``objstore.*_permissions``) on a real
server: every operation a template claims works, every attack it must stop is refused at once
(``PermissionDeniedError``, not a timeout), and no user can read another user's replies."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Iterator
from pathlib import Path

import nats
import pytest

import jetstream
import kvstore
import objstore
from jetstream._options import ConnectionOptions, run_sync
from tests.proxy import TcpProxy
from tests.security.permissions import inbox, server_config

FAST = 2.0  # seconds: far below the 5 s request timeout
API = "$JS.API"


def _users() -> dict[str, jetstream.Permissions | None]:
    return {
        "admin": None,
        "reader": kvstore.reader_permissions(
            "profiles", inbox_prefix=inbox("reader"), protect_consumers=["workers"]
        ),
        "writer": kvstore.writer_permissions("profiles", inbox_prefix=inbox("writer")),
        "alice": kvstore.prefix_writer_permissions(
            "profiles", "alice", inbox_prefix=inbox("alice")
        ),
        "uploader": objstore.uploader_permissions("files", inbox_prefix=inbox("uploader")),
        "viewer": objstore.reader_permissions("files", inbox_prefix=inbox("viewer")),
    }


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[jetstream.EmbeddedServer]:
    folder = tmp_path_factory.mktemp("secured")
    config = folder / "server.conf"
    config.write_text(server_config(_users()))
    with jetstream.EmbeddedServer(
        store_dir=folder / "store", extra_args=["-c", str(config)]
    ) as server:
        run_sync(lambda: _prepare(server))
        yield server


def url(server: jetstream.EmbeddedServer, user: str) -> str:
    return f"nats://{user}:{user}-pw@127.0.0.1:{server.port}"


async def connect(server: jetstream.EmbeddedServer, user: str) -> jetstream.JetStream:
    return await jetstream.connect(url(server, user), inbox_prefix=inbox(user))


async def _prepare(server: jetstream.EmbeddedServer) -> None:
    async with await jetstream.connect(url(server, "admin")) as js:
        bucket = await kvstore.create_bucket(js, "profiles", history=3)
        await bucket.put("alice.name", b"Alice")
        await bucket.put("bob.name", b"Bob")
        await bucket.put("bob.ssn", b"123-45-6789")
        await js.create_consumer_info(
            "KV_profiles", jetstream.ConsumerConfig(durable_name="workers", ack_policy="explicit")
        )
        store = await objstore.create_store(js, "files")
        await store.put("shared.bin", b"s" * 200_000)
        await objstore.create_store(js, "other")


async def _fast_denial(call: Awaitable[object]) -> jetstream.PermissionDeniedError:
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(jetstream.PermissionDeniedError) as denied:
        await call
    assert loop.time() - started < FAST, "denied promptly, not after a timeout"
    return denied.value


async def _refused(js: jetstream.JetStream, subject: str, body: object = None) -> None:
    """A raw API request the template must refuse."""
    payload = b"" if body is None else json.dumps(body).encode()
    await _fast_denial(js.send(subject, payload))


async def _subscription_refused(server: jetstream.EmbeddedServer, user: str, subject: str) -> None:
    errors: asyncio.Queue[str] = asyncio.Queue()

    async def note(error: Exception) -> None:
        errors.put_nowait(str(error).lower())

    nc = await nats.connect(url(server, user), error_cb=note, allow_reconnect=False)
    try:
        await nc.subscribe(subject)
        await nc.flush()
        error = await asyncio.wait_for(errors.get(), FAST)
        assert "permissions violation for subscription" in error and subject.lower() in error
    finally:
        await nc.close()


# -- what each template allows ---------------------------------------------------------------


async def test_prefix_writer_writes_and_reads_its_own_keys(
    secured: jetstream.EmbeddedServer,
) -> None:
    async with await connect(secured, "alice") as js:
        bucket = await kvstore.open_bucket(js, "profiles")
        rev = await bucket.put("alice.city", b"Paris", ttl="1h")
        assert (await bucket.get("alice.city")).value == b"Paris"
        rev = await bucket.update("alice.city", b"Lyon", revision=rev)
        await bucket.create("alice.zip", b"69000")
        await bucket.put_many({"alice.phone": b"555", "alice.mail": b"a@x"})
        await bucket.delete("alice.phone")
        await bucket.purge("alice.mail")
        with pytest.raises(kvstore.KeyNotFoundError):
            await bucket.get("alice.mail")
        assert (await bucket.get("alice.city")).revision == rev


async def test_reader_reads_everything_and_cleans_up_its_consumers(
    secured: jetstream.EmbeddedServer,
) -> None:
    async with await connect(secured, "reader") as js:
        bucket = await kvstore.open_bucket(js, "profiles")
        entry = await bucket.get("bob.name")
        assert (await bucket.get("bob.name", revision=entry.revision)).value == b"Bob"
        assert {"alice.name", "bob.name"} <= {k async for k in bucket.keys()}
        snapshot = await bucket.get_many(["alice.name", "bob.name"])
        assert snapshot["bob.name"].value == b"Bob"
        assert [e.value async for e in bucket.history("alice.name")] == [b"Alice"]
        async with bucket.watch("bob.>") as watcher:
            assert (await anext(watcher)).key in {"bob.name", "bob.ssn"}
    async with await jetstream.connect(url(secured, "admin")) as admin:
        names = [name async for name in admin.consumer_names("KV_profiles")]
    assert names == ["workers"], "the reader deleted its own consumers"


async def test_writer_writes_the_whole_bucket(secured: jetstream.EmbeddedServer) -> None:
    async with await connect(secured, "writer") as js:
        bucket = await kvstore.open_bucket(js, "profiles")
        await bucket.put_many({"carol.name": b"Carol", "dave.name": b"Dave"})
        async with bucket.watch("carol.>") as watcher:
            assert (await anext(watcher)).value == b"Carol"
        await bucket.delete("dave.name")


async def test_uploader_and_viewer_of_one_store(secured: jetstream.EmbeddedServer) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB: several chunks, flow-controlled
    async with await connect(secured, "uploader") as js:
        store = await objstore.open_store(js, "files")
        await store.put("a.bin", data, chunk_size=128 * 1024)
        await store.update_meta("a.bin", description="one")
        await store.add_link("a-link", "a.bin")
        with pytest.raises(jetstream.JetStreamError):  # cannot even look the other store up
            await objstore.open_store(js, "other")
        await _fast_denial(objstore.ObjectStore(js, "other").put("b.bin", b"y" * 300_000))
    async with await connect(secured, "viewer") as js:
        store = await objstore.open_store(js, "files")
        assert await store.get_bytes("a-link") == data
        assert {info.name async for info in store.list()} >= {"a.bin", "shared.bin"}
        await _fast_denial(store.put("c.bin", b"z"))
        await _fast_denial(store.delete("a.bin"))


async def test_prefix_writer_with_a_lost_commit_reply_gets_commit_unknown(
    secured: jetstream.EmbeddedServer,
) -> None:
    """Settling a lost answer needs the leader's lookups a prefix writer may not make: the
    caller gets the documented in-doubt error naming what to check, not a permission error
    that reads as "nothing was written" (the batch *was* stored)."""
    proxy = await TcpProxy(secured.port).start()

    def lose_replies_after_commit(chunk: bytes) -> bool:
        if b"Nats-Batch-Commit" in chunk:
            proxy.drop_to_client = True  # the commit reaches the server, its reply does not
            asyncio.get_running_loop().call_later(1.0, heal)
        return True

    def heal() -> None:
        proxy.drop_to_client = False
        proxy.on_client_bytes = None

    proxy.on_client_bytes = lose_replies_after_commit
    address = proxy.url.replace("nats://", "nats://alice:alice-pw@")
    try:
        async with await jetstream.connect(
            address, inbox_prefix=inbox("alice"), timeout=0.5, reconnect_time_wait=0.1
        ) as js:
            bucket = await kvstore.open_bucket(js, "profiles")
            with pytest.raises(jetstream.CommitUnknownError) as unknown:
                await bucket.put_many({"alice.lost1": b"1", "alice.lost2": b"2"})
            assert unknown.value.batch_id and unknown.value.msg_ids
            assert (await bucket.get("alice.lost2")).value == b"2", "it was stored"
    finally:
        await proxy.close()


# -- what each template refuses --------------------------------------------------------------


async def test_prefix_writer_cannot_read_or_write_other_keys(
    secured: jetstream.EmbeddedServer,
) -> None:
    async with await connect(secured, "alice") as js:
        bucket = await kvstore.open_bucket(js, "profiles")
        error = await _fast_denial(bucket.put("bob.city", b"Rome"))
        assert error.subject == "$kv.profiles.bob.city"  # as nats-py reports it: lowercased
        await _fast_denial(bucket.put_many({"alice.zip2": b"1", "bob.zip": b"2"}))
        with pytest.raises(kvstore.KeyNotFoundError):
            await bucket.get("alice.zip2")  # nothing of the refused batch was stored
        await _fast_denial(bucket.get("bob.ssn"))
        stream = "KV_profiles"
        await _refused(js, f"{API}.DIRECT.GET.{stream}", {"last_by_subj": "$KV.profiles.bob.ssn"})
        await _refused(js, f"{API}.DIRECT.GET.{stream}", {"seq": 3})
        await _refused(
            js, f"{API}.STREAM.MSG.GET.{stream}", {"last_by_subj": "$KV.profiles.bob.ssn"}
        )
        await _refused(js, f"{API}.CONSUMER.CREATE.{stream}.spy.$KV.profiles.bob.>")
        await _refused(js, f"{API}.STREAM.PURGE.{stream}", {"filter": "$KV.profiles.bob.>"})
        await _refused(js, f"{API}.STREAM.NAMES")


async def test_reader_cannot_write_nor_touch_protected_consumers(
    secured: jetstream.EmbeddedServer,
) -> None:
    async with await connect(secured, "reader") as js:
        bucket = await kvstore.open_bucket(js, "profiles")
        await _fast_denial(bucket.put("bob.name", b"x"))
        await _fast_denial(bucket.delete("alice.name"))
        stream = "KV_profiles"
        await _refused(js, f"{API}.CONSUMER.MSG.NEXT.{stream}.workers", {"batch": 1})
        await _refused(js, f"{API}.CONSUMER.DELETE.{stream}.workers")
        await _refused(js, f"{API}.CONSUMER.CREATE.{stream}.workers")
        await _refused(js, f"{API}.CONSUMER.CREATE.{stream}.workers.$KV.profiles.>")
        await _refused(js, f"{API}.CONSUMER.DURABLE.CREATE.{stream}.workers")
        await _refused(js, f"{API}.CONSUMER.INFO.{stream}.workers")
        await _refused(js, f"{API}.CONSUMER.LIST.{stream}")
        await _refused(js, f"{API}.CONSUMER.NAMES.{stream}")
        await _refused(js, f"{API}.STREAM.NAMES")
        await _refused(js, f"{API}.STREAM.LIST")
        await _refused(js, f"{API}.STREAM.PURGE.{stream}")
        await _refused(js, f"{API}.STREAM.INFO.OBJ_files")
    async with await jetstream.connect(url(secured, "admin")) as admin:
        info = await admin.consumer_info("KV_profiles", "workers")
    assert info.config.durable_name == "workers"


async def test_store_users_cannot_reach_other_stores_or_purge_as_viewers(
    secured: jetstream.EmbeddedServer,
) -> None:
    async with await connect(secured, "uploader") as js:
        await _refused(js, f"{API}.STREAM.PURGE.OBJ_other")
        await _refused(js, f"{API}.DIRECT.GET.OBJ_other", {"seq": 1})
        await _refused(js, f"{API}.STREAM.INFO.KV_profiles")
    async with await connect(secured, "viewer") as js:
        await _refused(js, f"{API}.STREAM.PURGE.OBJ_files")
        await _refused(js, f"{API}.STREAM.MSG.DELETE.OBJ_files", {"seq": 1})
        await _refused(js, f"{API}.STREAM.DELETE.OBJ_files")


@pytest.mark.parametrize("user", ["reader", "writer", "alice", "uploader", "viewer"])
async def test_no_user_can_read_another_users_replies(
    secured: jetstream.EmbeddedServer, user: str
) -> None:
    await _subscription_refused(secured, user, "_INBOX.>")
    other = "viewer" if user != "viewer" else "reader"
    await _subscription_refused(secured, user, f"{inbox(other)}.>")


async def test_the_shared_inbox_is_not_a_template_option() -> None:
    with pytest.raises(jetstream.ClientValidationError, match="own"):
        kvstore.reader_permissions("profiles", inbox_prefix="_INBOX")
    with pytest.raises(jetstream.ClientValidationError):
        objstore.uploader_permissions("files", inbox_prefix="_INBOX_*")
    with pytest.raises(jetstream.ClientValidationError, match=r"\$"):
        kvstore.reader_permissions("profiles", inbox_prefix="$KV")
    with pytest.raises(kvstore.InvalidKeyError):
        kvstore.prefix_writer_permissions("profiles", "alice.>", inbox_prefix="_INBOX_a")
    with pytest.raises(jetstream.ClientValidationError):
        kvstore.reader_permissions("profiles", inbox_prefix="_I_r", protect_consumers=["a.b"])


async def test_a_wrong_inbox_prefix_is_named_at_once(secured: jetstream.EmbeddedServer) -> None:
    async with await jetstream.connect(url(secured, "alice")) as wrong_prefix:
        bucket = kvstore.Bucket(wrong_prefix, "profiles", kvstore.BucketConfig())
        error = await _fast_denial(bucket.put("alice.private", b"x"))
        assert "subscribe" in str(error) and "inbox" in str(error)
        # The server refuses the shared reply inbox once; every later request on it would
        # only time out (retried reads for the whole retry deadline: helper-39).
        for _ in range(2):
            again = await _fast_denial(bucket.get("alice.name"))
            assert "inbox" in str(again)
        await _fast_denial(wrong_prefix.stream_info("KV_profiles"))


async def test_spark_connection_options_carry_the_inbox_prefix(
    secured: jetstream.EmbeddedServer,
) -> None:
    """Executors connect through ``ConnectionOptions``: a template user needs its inbox there."""
    options = {"servers": url(secured, "alice"), "inboxPrefix": inbox("alice")}
    async with await ConnectionOptions.from_strings(options).connect() as js:
        bucket = await kvstore.open_bucket(js, "profiles")
        await bucket.put_many({"alice.spark1": b"1", "alice.spark2": b"2"})
        assert (await bucket.get("alice.spark2")).value == b"2"
    with pytest.raises(jetstream.ClientValidationError, match="inboxPrefix"):
        ConnectionOptions.from_strings({**options, "inboxPrefix": "_INBOX_a.>"})


def test_permission_templates_are_valid_server_config(tmp_path: Path) -> None:
    config = tmp_path / "c.conf"
    config.write_text(server_config(_users()))
    with jetstream.EmbeddedServer(extra_args=["-c", str(config)]):
        pass  # the server refuses to start on an invalid configuration


async def test_a_prefix_writers_get_many_is_refused_at_once(
    secured: jetstream.EmbeddedServer,
) -> None:
    """get_many is not a prefix writer's (its batched direct get takes a body the server cannot
    confine): refused at once, not after the 5 s request timeout."""
    async with await connect(secured, "alice") as js:
        bucket = await kvstore.open_bucket(js, "profiles")
        await _fast_denial(bucket.get_many(["alice.name"]))


async def test_a_writer_compacts_tombstones(secured: jetstream.EmbeddedServer) -> None:
    """purge_deletes is one of the writes a whole-bucket writer is given."""
    async with await connect(secured, "writer") as js:
        bucket = await kvstore.open_bucket(js, "profiles")
        await bucket.put("carol.tmp", b"x")
        await bucket.delete("carol.tmp")
        assert await bucket.purge_deletes(older_than=None) >= 1
        with pytest.raises(kvstore.KeyNotFoundError):
            _ = [entry async for entry in bucket.history("carol.tmp")]
