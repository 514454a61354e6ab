"""KV watch, keys and history on a real server, including a watch across a server restart."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Coroutine, Generator
from datetime import timedelta
from pathlib import Path
from typing import Any

import nats
import pytest

import jetstream
import kvstore
from kvstore import Bucket, Entry, Op
from tests.conftest import BucketFactory


async def _collect(watcher: kvstore.KeyWatcher, count: int, timeout: float = 10) -> list[Entry]:
    entries: list[Entry] = []

    async def take() -> None:
        async for entry in watcher:
            entries.append(entry)
            if len(entries) == count:
                return

    await asyncio.wait_for(take(), timeout)
    return entries


async def test_watch_sees_put_delete_purge_and_expired_as_distinct_ops(
    make_bucket: BucketFactory,
) -> None:
    bucket = await make_bucket(history=5, marker_ttl=timedelta(seconds=2))
    async with bucket.watch() as watcher:
        await bucket.put("a", b"1")
        await bucket.delete("a")
        await bucket.put("b", b"2")
        await bucket.purge("b")
        await bucket.put("session", b"t", ttl=2)
        entries = await _collect(watcher, 6)
    assert [(e.key, e.op) for e in entries] == [
        ("a", Op.PUT), ("a", Op.DELETE), ("b", Op.PUT), ("b", Op.PURGE),
        ("session", Op.PUT), ("session", Op.EXPIRED),
    ]  # fmt: skip


async def test_bucket_max_age_expiry_is_seen_as_expired(make_bucket: BucketFactory) -> None:
    bucket = await make_bucket(max_age=timedelta(seconds=1), marker_ttl=timedelta(seconds=3))
    async with bucket.watch(updates_only=True) as watcher:
        await bucket.put("k", b"v")
        entries = await _collect(watcher, 2)
    assert [e.op for e in entries] == [Op.PUT, Op.EXPIRED]


async def test_initial_snapshot_then_updates(bucket: Bucket) -> None:
    for i in range(5):
        await bucket.put(f"k{i}", b"old")
    await bucket.put("k0", b"newer")
    async with bucket.watch() as watcher:
        assert not watcher.initial_done.is_set()
        snapshot = await _collect(watcher, 5)
        assert watcher.initial_done.is_set()
        assert {e.key: e.value for e in snapshot}["k0"] == b"newer", "last value per key"
        assert snapshot[-1].delta == 0
        await bucket.put("k9", b"live")
        (update,) = await _collect(watcher, 1)
    assert (update.key, update.value) == ("k9", b"live")


async def test_a_snapshot_of_large_values_with_history_has_every_key(
    make_bucket: BucketFactory,
) -> None:
    """40 MiB of current values, each key with an older revision before it: the server then
    delivers the snapshot from a list of each key's last revision. A pull bounded in bytes
    that a value did not fit lost that key from the snapshot for good (nats-server drops its
    place in the list), so a watch's pulls are bounded in messages only."""
    bucket = await make_bucket(history=2)
    keys = [f"k{i:03}" for i in range(320)]
    await bucket.put_many({key: b"old" for key in keys[:100]})
    await bucket.put_many({key: b"old" for key in keys[100:]})
    value = bytes(128 * 1024)
    for start in range(0, len(keys), 20):
        await bucket.put_many({key: value for key in keys[start : start + 20]})
    async with bucket.watch() as watcher:
        snapshot = await asyncio.wait_for(watcher.initial(), 30)
    assert [entry.key for entry in snapshot] == keys
    assert all(entry.value == value for entry in snapshot)


async def test_a_watch_of_large_values_asks_for_few_at_a_time(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer
) -> None:
    """A watch asks for thousands of small values at a time, but holds about 8 MiB of large
    ones: a pull asks for at most 8 messages of the largest size the server takes until it
    has seen 900 KiB values, then 9. (It asked for 500: the server sent 90 MB and closed the
    connection as a slow consumer, and the watch started over.)"""
    bucket = await make_bucket()
    large = bytes(900 * 1024)
    for i in range(110):
        await bucket.put(f"k{i:03}", large)
    observer = await nats.connect(nats_server.url)
    batches: list[int] = []

    async def seen(msg: Any) -> None:
        batches.append(json.loads(msg.data)["batch"])

    await observer.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{bucket.stream}.>", cb=seen)
    await observer.flush()
    try:
        async with bucket.watch() as watcher:
            snapshot = await asyncio.wait_for(watcher.initial(), 30)
            assert watcher.resets == 0
        await observer.flush()
    finally:
        await observer.close()
    assert len(snapshot) == 110
    assert batches and max(batches) <= 9, batches


async def test_a_watch_fitted_to_small_values_that_meets_large_ones_holds_a_bounded_buffer(
    make_bucket: BucketFactory,
) -> None:
    """300 small values, then 60 of 900 KiB: the pull fitted to the small ones asks for
    thousands, and the server sends 54 MB at once. Past 32 MiB buffered the watch drops what
    comes and starts over after the last entry it handed out (a window fitted to the large
    values), so the client holds a bounded buffer; every entry comes once, in order."""
    bucket = await make_bucket()
    small = {f"a{i:03}": b"v" for i in range(300)}
    await bucket.put_many(small)
    large = bytes(900 * 1024)
    for i in range(60):
        await bucket.put(f"b{i:02}", large)
    async with bucket.watch() as watcher:
        first = [await anext(watcher) for _ in range(10)]  # the first pull's, sizes unknown
        puller = watcher._consumer._puller
        assert puller is not None
        await asyncio.wait_for(puller.ended.wait(), 10)  # nothing read meanwhile
        window = puller._window
        assert window.buffered_bytes <= window.memory_cap + len(large) + 200
        rest = await asyncio.wait_for(watcher.initial(), 30)
        assert watcher.resets == 1
    keys = [entry.key for entry in [*first, *rest]]
    assert keys == [*small, *(f"b{i:02}" for i in range(60))]


async def test_initial_ends_with_the_snapshot_also_when_its_last_messages_are_left_out(
    js: jetstream.JetStream, make_bucket: BucketFactory
) -> None:
    """A loop checking initial_done after each entry would wait for the next change here:
    the snapshot's last messages are a tombstone (ignore_deletes) and a key the codec did
    not write."""
    bucket = await make_bucket(key_codec=kvstore.Base64KeyCodec(), history=5)
    plain = await kvstore.open_bucket(js, bucket.name)
    await bucket.put("kept", b"1")
    await bucket.put("gone", b"2")
    await bucket.delete("gone")
    await plain.put("not=base64", b"foreign")
    async with asyncio.timeout(30), bucket.watch(ignore_deletes=True) as watcher:
        assert [entry.key for entry in await watcher.initial()] == ["kept"]
        assert watcher.initial_done.is_set()
        assert [entry.key async for entry in watcher.initial()] == []  # done stays done
        await bucket.put("later", b"3")
        assert (await anext(watcher)).key == "later"
    async with bucket.watch(updates_only=True) as watcher:
        assert [entry async for entry in watcher.initial()] == []


async def test_empty_bucket_and_updates_only_are_done_at_once(bucket: Bucket) -> None:
    async with bucket.watch() as watcher:
        assert watcher.initial_done.is_set()
    await bucket.put("old", b"1")
    async with bucket.watch(updates_only=True) as watcher:
        assert watcher.initial_done.is_set()
        await bucket.put("new", b"2")
        (entry,) = await _collect(watcher, 1)
    assert entry.key == "new"


async def test_watch_options(bucket: Bucket) -> None:
    r1 = await bucket.put("a.x", b"1")
    await bucket.put("a.x", b"2")
    await bucket.put("b.y", b"3")
    await bucket.delete("a.x")
    async with bucket.watch("a.>", include_history=True) as watcher:
        assert [e.value for e in await _collect(watcher, 3)] == [b"1", b"2", b""]
    async with bucket.watch(["a.>", "b.>"], ignore_deletes=True) as watcher:
        await bucket.put("a.z", b"4")
        assert [e.key for e in await _collect(watcher, 2)] == ["b.y", "a.z"]
    async with bucket.watch("b.y", meta_only=True) as watcher:
        (meta,) = await _collect(watcher, 1)
        assert meta.value == b"" and meta.op is Op.PUT
    async with bucket.watch(resume_from=r1 + 1) as watcher:
        resumed = await _collect(watcher, 3)
        assert [e.revision for e in resumed] == [r1 + 1, r1 + 2, r1 + 3]


@pytest.mark.parametrize(
    "options",
    [
        {"include_history": True, "updates_only": True},
        {"resume_from": 3, "updates_only": True},
        {"resume_from": 0},
        {"keys": "a.>.b"},
        {"keys": []},
    ],
)
def test_conflicting_watch_options_are_refused(bucket: Bucket, options: dict[str, object]) -> None:
    with pytest.raises(jetstream.ClientValidationError):
        bucket.watch(**options)  # type: ignore[arg-type]


async def test_keys_and_history(bucket: Bucket) -> None:
    await bucket.put("alice.name", b"A")
    await bucket.put("alice.city", b"P")
    await bucket.put("bob.name", b"B")
    await bucket.delete("alice.city")
    await bucket.put("alice.name", b"Al")
    assert sorted([k async for k in bucket.keys()]) == ["alice.name", "bob.name"]
    assert [k async for k in bucket.keys("alice.>")] == ["alice.name"]
    assert sorted([k async for k in bucket.keys(["*.name"])]) == ["alice.name", "bob.name"]
    history = [e async for e in bucket.history("alice.city")]
    assert [e.op for e in history] == [Op.PUT, Op.DELETE]
    assert [e.value async for e in bucket.history("alice.name")] == [b"A", b"Al"]
    with pytest.raises(kvstore.KeyNotFoundError):
        [e async for e in bucket.history("nobody")]
    with pytest.raises(kvstore.InvalidKeyError):
        bucket.keys("a..b")


async def test_a_history_closed_midway_deletes_its_consumer(
    js: jetstream.JetStream, bucket: Bucket
) -> None:
    """history() is an iterator class now (it goes on after a value that does not open); it
    still closes like the async generator it was, so ``aclosing`` ends its consumer."""
    for i in range(3):
        await bucket.put("k", b"%d" % i)
    for history in (bucket.history("k"), bucket.typed(bytes).history("k")):
        async with contextlib.aclosing(history) as revisions:  # type: ignore[type-var]
            async for _ in revisions:
                break
        assert [name async for name in js.consumer_names(bucket.stream)] == []


async def test_watch_survives_a_server_kill_and_restart(tmp_path: Path) -> None:
    """Every revision written before and after the restart arrives exactly once, in order."""
    server = jetstream.EmbeddedServer(store_dir=tmp_path / "store")
    server.start()
    try:
        async with await jetstream.connect(
            server.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1, timeout=1.0
        ) as js:
            bucket = await kvstore.create_bucket(js, "restart", history=10)
            written: list[int] = []
            for i in range(50):
                written.append(await bucket.put(f"k{i % 7}", str(i).encode()))
            async with bucket.watch(include_history=True) as watcher:
                before = await _collect(watcher, 50)
                await asyncio.to_thread(server.kill)
                await asyncio.sleep(0.3)
                await asyncio.to_thread(server.start)
                for i in range(50, 100):
                    while True:
                        try:
                            written.append(await bucket.put(f"k{i % 7}", str(i).encode()))
                            break
                        except (jetstream.NoRespondersError, jetstream.RequestTimeoutError):
                            await asyncio.sleep(0.1)  # the server is still starting
                after = await _collect(watcher, 50, timeout=30)
            delivered = [e.revision for e in before + after]
            assert delivered == written
            assert [e.value for e in before + after] == [str(i).encode() for i in range(100)]
    finally:
        server.close()


async def test_overlapping_filters_watch_and_list_once(make_bucket: BucketFactory) -> None:
    """A filter covered by another (``a.b`` under ``a.>``) or given twice was sent as is,
    and the server refused the consumer (10138); it is dropped now."""
    bucket = await make_bucket()
    await bucket.put("a.b", b"1")
    await bucket.put("a.c", b"2")
    assert sorted([key async for key in bucket.keys(["a.>", "a.b", "a.>"])]) == ["a.b", "a.c"]
    async with bucket.watch(["a.b", "a.>"]) as watcher:
        seen = [(await watcher.__anext__()).key for _ in range(2)]
    assert seen == ["a.b", "a.c"]
    with pytest.raises(kvstore.InvalidKeyError, match="overlap"):
        async with bucket.watch(["a.*.c", "a.b.>"]):
            pass


Receive = Callable[[jetstream.PullMessage], None]


def _intercept_deliveries(
    watcher: kvstore.KeyWatcher, handle: Callable[[jetstream.PullMessage, Receive], None]
) -> None:
    """Pass the watch's current consumer's deliveries through ``handle(message, receive)``
    (a fault in transit); a consumer the watch recreates later receives normally."""
    puller = watcher._consumer._puller
    assert puller is not None
    inbox = puller._inbox
    receive = inbox._receive
    inbox._receive = lambda message: handle(message, receive)


async def test_a_delivery_lost_in_transit_is_recovered_in_order(bucket: Bucket) -> None:
    """A consumer-sequence gap (a delivery the client never got) recreates the consumer after
    the last delivered revision; here the gap is found among messages already buffered, where
    the watch takes them without waiting."""
    for i in range(6):
        await bucket.put(f"k{i}", b"v")
    async with bucket.watch() as watcher:
        lost: list[int] = []

        def lose_the_second(message: jetstream.PullMessage, receive: Receive) -> None:
            if message.reply and message.metadata.consumer_seq == 2:
                lost.append(message.metadata.stream_seq)
                return
            receive(message)

        _intercept_deliveries(watcher, lose_the_second)
        entries = await _collect(watcher, 6)
    assert len(lost) == 1
    assert [e.key for e in entries] == [f"k{i}" for i in range(6)]
    assert watcher.resets == 1


async def test_a_stray_delivery_is_reported_once_and_the_watch_goes_on(bucket: Bucket) -> None:
    """A message on the watch's inbox that is no consumer delivery (its reply is not an ack
    subject) is reported once; the entries after it still arrive."""
    for i in range(8):
        await bucket.put(f"k{i}", b"v")
    async with bucket.watch() as watcher:

        def stray_before_the_fifth(message: jetstream.PullMessage, receive: Receive) -> None:
            if message.reply and message.metadata.consumer_seq == 5:
                receive(jetstream.PullMessage("x", "_INBOX.stray", b"", {}, 0, bucket.js.nc))
            receive(message)

        _intercept_deliveries(watcher, stray_before_the_fifth)
        keys: list[str] = []
        errors = 0
        while len(keys) < 8:
            try:
                keys.append((await asyncio.wait_for(watcher.__anext__(), 10)).key)
            except ValueError:
                errors += 1
                assert errors == 1, "reported once"
    assert keys == [f"k{i}" for i in range(8)]


KEYS = 2000


class _TaskCounter:
    """Counts the tasks the running loop creates while installed (a task factory)."""

    def __init__(self) -> None:
        self.created = 0

    def __call__(
        self,
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine[Any, Any, Any] | Generator[Any, None, Any],
        **kwargs: Any,
    ) -> asyncio.Future[Any]:
        self.created += 1
        return asyncio.Task(coro, loop=loop, **kwargs)


async def test_keys_scan_starts_no_task_per_key(make_bucket: Any) -> None:
    """keys() (like every until-caught-up scan) waited for each message through
    ``asyncio.wait_for``, a task and a timer per message: twice a watch's cost per key, and on
    the old code this test counted about one task per key."""
    bucket: kvstore.Bucket = await make_bucket()
    for start in range(0, KEYS, 1000):
        await bucket.put_many({f"k{i}": b"v" for i in range(start, start + 1000)})
    loop = asyncio.get_running_loop()
    counter = _TaskCounter()
    loop.set_task_factory(counter)  # type: ignore[arg-type]
    try:
        keys = [key async for key in bucket.keys()]
    finally:
        loop.set_task_factory(None)
    assert len(keys) == KEYS
    # The consumer's puller and its clean-up need a few; nothing may scale with the keys.
    assert counter.created < 50, counter.created
