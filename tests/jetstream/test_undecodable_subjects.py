"""A message whose subject is not UTF-8 (any client allowed to publish on a bucket's or store's
subjects can store one; the server takes the bytes) never stops a reader: watches, listings,
scans, consumers, fetches and group members skip it, report it once naming its stream
sequence and count it, and go on; a read of exactly that message gets a typed error; and the
connection keeps reading. Bad bytes in header values and in JSON records are typed too."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
from collections.abc import AsyncIterator, Callable

import pytest

import jetstream
import kvstore
import objstore
import pcgroups
from jetstream import ConsumerConfig, JetStream, StreamConfig
from tests.conftest import BucketFactory
from tests.raw_nats import raw_publish

pytestmark = pytest.mark.integration

NOT_UTF8 = b"\xff\xfe"
DEADLINE = 30  # a guard against hanging, never a measurement


async def plant(
    url: str, subject: bytes, payload: bytes = b"hostile", *, stored: bool = True
) -> None:
    """Publish (and, by default, wait until a stream stored) one message on ``subject``
    (bytes) as a raw client would."""
    await raw_publish(url, [(subject, b"", payload)], stored=stored)


def skip_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "is not UTF-8" in r.getMessage()]


async def api_requests(js: JetStream) -> int:
    return (await js.account_info()).api.total


async def test_keys_history_and_watch_skip_a_key_that_is_not_utf8_and_go_on(
    js: JetStream,
    nats_server: jetstream.EmbeddedServer,
    bucket: kvstore.Bucket,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    await bucket.put("a", b"1")
    await plant(nats_server.url, f"$KV.{bucket.name}.k".encode() + NOT_UTF8)
    await bucket.put("z", b"2")
    before = await api_requests(js)
    async with asyncio.timeout(DEADLINE):
        assert [key async for key in bucket.keys()] == ["a", "z"]
        assert [key async for key in bucket.keys(">")] == ["a", "z"]
        assert [e.revision async for e in bucket.history("z")] == [3]
        async with bucket.watch() as watch:
            assert [(await anext(watch)).key, (await anext(watch)).key] == ["a", "z"]
            assert watch.initial_done.is_set()
            await bucket.put("after", b"3")
            assert (await anext(watch)).key == "after"  # later puts still come
            assert watch.skipped == 1
            assert watch.resets == 0
    # Two API requests a reader (create, delete), a few for the puts: not a storm of resets.
    assert await api_requests(js) - before < 20
    assert js.skipped_messages == 3  # keys() twice, the watch once
    warnings = skip_warnings(caplog)
    assert len(warnings) == 3
    assert all(f"stream sequence 2 of {bucket.stream}" in w for w in warnings)
    assert all(r"b'$KV." in w and r"k\xff\xfe'" in w for w in warnings)


async def test_a_snapshot_ending_in_a_skipped_message_is_done_with_its_last_entry(
    nats_server: jetstream.EmbeddedServer, bucket: kvstore.Bucket
) -> None:
    await bucket.put("a", b"1")
    await plant(nats_server.url, f"$KV.{bucket.name}.".encode() + NOT_UTF8)
    async with asyncio.timeout(DEADLINE), bucket.watch() as watch:
        assert (await anext(watch)).key == "a"
        await watch.initial_done.wait()
        assert watch.skipped == 1
        await bucket.put("b", b"2")
        assert (await anext(watch)).key == "b"


async def test_a_snapshot_ending_in_more_skipped_messages_than_one_pull_ends_with_its_last_entry(
    nats_server: jetstream.EmbeddedServer, bucket: kvstore.Bucket, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)  # one warning a skipped message
    await bucket.put("a", b"1")
    planted = [(f"$KV.{bucket.name}.k{i}.".encode() + NOT_UTF8, b"", b"x") for i in range(600)]
    await raw_publish(nats_server.url, planted)  # more than a pull brings (500)
    async with asyncio.timeout(DEADLINE), bucket.watch() as watcher:  # README's "Watching keys"
        assert [entry.key async for entry in watcher.initial()] == ["a"]
        assert watcher.initial_done.is_set() and watcher.skipped == 600
        await bucket.put("b", b"2")
        assert (await anext(watcher)).key == "b"


async def test_a_read_of_exactly_that_message_is_a_typed_error(
    js: JetStream, nats_server: jetstream.EmbeddedServer, bucket: kvstore.Bucket
) -> None:
    await bucket.put("a", b"1")
    await plant(nats_server.url, f"$KV.{bucket.name}.a".encode() + NOT_UTF8)
    with pytest.raises(jetstream.UndecodableMessageError) as caught:
        await js.get_message(bucket.stream, 2)
    assert (caught.value.stream, caught.value.seq) == (bucket.stream, 2)
    with pytest.raises(kvstore.KeyNotFoundError, match="not a revision of key 'a'"):
        await bucket.get("a", revision=2)
    assert (await bucket.get("a")).value == b"1"
    assert (await bucket.get_many(["a"]))["a"].value == b"1"


async def test_the_leaders_json_api_shows_the_servers_replacement_which_names_nothing(
    js: JetStream, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    """STREAM.MSG.GET (streams without direct get, ``direct=False``) sends JSON, which the
    server's encoder makes valid UTF-8 by putting U+FFFD in place of the bytes: the subject it
    shows is not the stored one, and no read of that subject finds a message."""
    name = unique_name("U")  # a stream without allow_direct: reads go to the leader
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    try:
        await plant(nats_server.url, f"{name}.a".encode() + NOT_UTF8)
        for direct in (False, None):  # None: direct get, falling back to the leader
            message = await js.get_message(name, 1, direct=direct)
            assert message.subject == f"{name}.a\ufffd\ufffd"
        with pytest.raises(jetstream.MessageNotFoundError):
            await js.get_last_message(name, f"{name}.a\ufffd\ufffd", direct=False)
    finally:
        await js.delete_stream(name)


async def test_header_values_that_are_not_utf8_keep_the_entry(
    nats_server: jetstream.EmbeddedServer, bucket: kvstore.Bucket
) -> None:
    block = b"NATS/1.0\r\nX-Note: caf\xe9\r\n\r\n"
    await raw_publish(nats_server.url, [(f"$KV.{bucket.name}.k", block, b"value")])
    assert (await bucket.get("k")).value == b"value"
    async with asyncio.timeout(DEADLINE), bucket.watch() as watch:
        entry = await anext(watch)
    assert (entry.key, entry.value, entry.op) == ("k", b"value", kvstore.Op.PUT)


async def test_purge_deletes_and_rekey_end(
    js: JetStream, nats_server: jetstream.EmbeddedServer, make_bucket: BucketFactory
) -> None:
    first = os.urandom(32)
    old = jetstream.Keyring({"k1": first}, primary="k1")
    ring = jetstream.Keyring({"k1": first, "k2": os.urandom(32)}, primary="k2")
    bucket = await make_bucket(history=5, encryption=old)
    await bucket.put("a", b"1")
    await bucket.delete("gone")
    await plant(nats_server.url, f"$KV.{bucket.name}.".encode() + NOT_UTF8)
    await bucket.put("z", b"2")
    async with asyncio.timeout(DEADLINE):
        await bucket.purge_deletes(older_than=None)
        rekeyed = await kvstore.open_bucket(js, bucket.name, encryption=ring)
        await rekeyed.rekey()
        assert {k: (await rekeyed.get(k)).value for k in ("a", "z")} == {"a": b"1", "z": b"2"}


async def test_object_listing_and_watch_skip_a_meta_subject_that_is_not_utf8(
    js: JetStream, nats_server: jetstream.EmbeddedServer, store: objstore.ObjectStore
) -> None:
    await store.put("first", b"1")
    await plant(nats_server.url, f"$O.{store.name}.M.".encode() + NOT_UTF8, b"{}")
    await store.put("second", b"2")
    async with asyncio.timeout(DEADLINE):
        assert [info.name async for info in store.list()] == ["first", "second"]
        watch = store.watch()
        assert [(await anext(watch)).name for _ in range(2)] == ["first", "second"]
        await store.put("third", b"3")
        assert (await anext(watch)).name == "third"
        await watch.aclose()
    assert js.skipped_messages == 2


@pytest.fixture
async def stream(js: JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    name = unique_name("U")
    await js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    yield name
    await js.delete_stream(name)


async def test_consume_fetch_and_next_skip_it_terminate_it_and_report_it(
    js: JetStream, nats_server: jetstream.EmbeddedServer, stream: str
) -> None:
    await js.publish(f"{stream}.a", b"1")
    await plant(nats_server.url, f"{stream}.".encode() + NOT_UTF8)
    await js.publish(f"{stream}.z", b"2")
    config = ConsumerConfig(durable_name="c", ack_policy="explicit", ack_wait=1)
    consumer = await js.create_consumer(stream, config)
    warnings: list[jetstream.JetStreamError] = []
    async with asyncio.timeout(DEADLINE):
        async with consumer.consume(error_callback=warnings.append) as messages:
            got = []
            async for message in messages:
                got.append(message.subject)
                await message.ack()
                if len(got) == 2:
                    await message.in_progress(wait=True)  # the acks and the term were applied
                    break
            assert messages.skipped == 1
        assert got == [f"{stream}.a", f"{stream}.z"]
        assert [type(w) for w in warnings] == [jetstream.UndecodableMessageError]
        assert isinstance(warnings[0], jetstream.UndecodableMessageError)
        assert (warnings[0].stream, warnings[0].seq) == (stream, 2)
        info = await consumer.info()
        assert (info.num_ack_pending, info.num_redelivered) == (0, 0)  # terminated, not redelivered

        fetcher = await js.create_consumer(stream, ConsumerConfig(ack_policy="explicit"))
        fetched = [m.subject async for m in fetcher.fetch(3, expires=1)]
        assert fetched == [f"{stream}.a", f"{stream}.z"]
        other = await js.create_consumer(
            stream,
            ConsumerConfig(
                ack_policy="explicit", opt_start_seq=2, deliver_policy="by_start_sequence"
            ),
        )
        assert (await other.next(timeout=5)).subject == f"{stream}.z"
    assert js.skipped_messages == 3


async def test_a_kept_alive_buffer_skips_it_after_it_waited(
    js: JetStream, nats_server: jetstream.EmbeddedServer, stream: str
) -> None:
    """``keep_buffered``: the message waits behind a slow callback and gets in-progress
    calls like the others, then is skipped and terminated; nothing is delivered twice."""
    await js.publish(f"{stream}.a", b"1")
    await plant(nats_server.url, f"{stream}.".encode() + NOT_UTF8)
    await js.publish(f"{stream}.z", b"2")
    config = ConsumerConfig(durable_name="kb", ack_policy="explicit", ack_wait=2)
    consumer = await js.create_consumer(stream, config)
    got = []
    async with asyncio.timeout(DEADLINE):
        async with consumer.consume(keep_buffered=True) as messages:
            async for message in messages:
                await asyncio.sleep(1.5)  # the others wait in the buffer meanwhile
                got.append((message.subject, message.metadata.delivered))
                await message.ack()
                if len(got) == 2:
                    await message.in_progress(wait=True)  # the acks and the term were applied
                    break
            assert messages.skipped == 1
        info = await consumer.info()
    assert got == [(f"{stream}.a", 1), (f"{stream}.z", 1)]
    assert info.delivered.consumer_seq == 3 and info.num_ack_pending == 0


async def test_a_core_subscription_keeps_receiving_after_a_subject_that_is_not_utf8(
    js: JetStream, nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> None:
    prefix = unique_name("core")
    sub = await js.nc.subscribe(f"{prefix}.>")
    await js.nc.flush()  # the server has the subscription
    await plant(nats_server.url, f"{prefix}.".encode() + NOT_UTF8, stored=False)
    await js.nc.publish(f"{prefix}.ok", b"fine")
    message = await sub.next_msg(timeout=DEADLINE)  # nats-py's reader would have died
    assert (message.subject, message.data) == (f"{prefix}.ok", b"fine")
    await sub.unsubscribe()
    assert await js.account_info()  # requests still get their replies


async def test_group_members_and_watch_groups_skip_it_and_go_on(
    js: JetStream, nats_server: jetstream.EmbeddedServer, make_bucket: BucketFactory
) -> None:
    bucket = await make_bucket(history=5)
    await pcgroups.create_bucket_group(bucket, "g", max_members=1, members=["m1"])
    try:
        await bucket.put("a", b"1")
        await plant(nats_server.url, f"$KV.{bucket.name}.".encode() + NOT_UTF8)
        last = await bucket.put("z", b"2")
        seen = []
        template = ConsumerConfig(ack_wait=2)
        async with (
            asyncio.timeout(DEADLINE),
            pcgroups.watch_group(bucket, "g", "m1", config=template) as changes,
        ):
            async for change in changes:
                seen.append(change.key)
                await change.ack()
                if change.revision == last:
                    break
        assert seen == ["a", "z"]
    finally:
        await pcgroups.delete_bucket_group(bucket, "g")


async def test_json_records_that_are_not_utf8_are_typed_errors(
    js: JetStream, nats_server: jetstream.EmbeddedServer, store: objstore.ObjectStore
) -> None:
    token = base64.urlsafe_b64encode(b"peer").decode()
    for record in (b'{"name":"peer\xff","bucket":"x"}', b'{"name":"peer\\ud800"}'):
        await plant(nats_server.url, f"$O.{store.name}.M.{token}".encode(), record)
        with pytest.raises(objstore.InvalidObjectMetaError):
            await store.info("peer")
    for config in (b'{"max_members":1,"members":["m\xff"]}', b'{"members":["\\ud800"]}'):
        with pytest.raises(pcgroups.CorruptGroupConfigError):
            pcgroups.wire.decode_elastic_config(config)


async def test_cli_listings_end(
    js: JetStream,
    nats_server: jetstream.EmbeddedServer,
    bucket: kvstore.Bucket,
    store: objstore.ObjectStore,
) -> None:
    from tests.cli.cli_helpers import jetstore

    await bucket.put("a", b"1")
    await plant(nats_server.url, f"$KV.{bucket.name}.".encode() + NOT_UTF8)
    await store.put("o", b"1")
    await plant(nats_server.url, f"$O.{store.name}.M.".encode() + NOT_UTF8, b"{}")
    url = ("--server", nats_server.url)
    keys = await asyncio.to_thread(jetstore, "kv", "keys", bucket.name, *url)
    assert (keys.code, keys.text.split()) == (0, ["a"])
    assert "is not UTF-8" in keys.err
    listing = await asyncio.to_thread(jetstore, "obj", "ls", store.name, *url)
    assert listing.code == 0 and "o" in listing.text.split()
