"""pcgroups.sync, the blocking twin of the group API, on a real server: the admin calls do
what their async twins do and raise the same error classes; a blocking member iterated in a
thread receives and acks its messages while the admin API steps it down; leaving its ``with``
block stops it (its config watch's consumer is gone, its pin released); a deleted group ends
its iterator with GroupDeletedError; a watch group delivers a blocking bucket's changes."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator

import pytest

import jetstream
import jetstream.sync
import kvstore
import kvstore.sync
import pcgroups
import pcgroups.sync
from jetstream import ClientValidationError, StreamConfig
from kvstore import Op
from pcgroups._consumer_use import pins
from pcgroups._models import STATIC_BUCKET

pytestmark = pytest.mark.integration


@pytest.fixture
def bjs(nats_server: jetstream.EmbeddedServer) -> Iterator[jetstream.sync.JetStream]:
    with jetstream.sync.connect(nats_server.url) as js:
        yield js


@pytest.fixture
def stream(bjs: jetstream.sync.JetStream, unique_name: Callable[[str], str]) -> Iterator[str]:
    """A stream on ``<name>.*`` whose messages are stored as ``0.<name>.<key>`` (one
    partition, orbit's static setup); its groups and their work queues go with it."""
    name = unique_name("pcg")
    config = StreamConfig(name=name, subjects=[f"{name}.*"])
    config.subject_transform = {
        "src": f"{name}.*",
        "dest": f"{{{{partition(1,1)}}}}.{name}.{{{{wildcard(1)}}}}",
    }
    bjs.add_stream(config)
    yield name
    for group in pcgroups.sync.list_static(bjs, name):
        pcgroups.sync.delete_static(bjs, name, group)
    for group in pcgroups.sync.list_elastic(bjs, name):
        pcgroups.sync.delete_elastic(bjs, name, group)
    bjs.delete_stream(name)


def test_the_admin_api_round_trips_with_the_async_errors(
    bjs: jetstream.sync.JetStream, stream: str
) -> None:
    created = pcgroups.sync.create_static(bjs, stream, "s", max_members=1, members=["m1"])
    assert pcgroups.sync.static_config(bjs, stream, "s") == created
    assert list(pcgroups.sync.list_static(bjs, stream)) == ["s"]
    assert pcgroups.sync.static_status(bjs, stream, "s").partitions[0].member == "m1"
    assert pcgroups.sync.static_active_members(bjs, stream, "s") == []
    with pytest.raises(pcgroups.MemberNotFoundError):
        pcgroups.sync.static_step_down(bjs, stream, "s", "m9")
    pcgroups.sync.delete_static(bjs, stream, "s")
    with pytest.raises(pcgroups.GroupNotFoundError):
        pcgroups.sync.static_config(bjs, stream, "s")

    by_key = pcgroups.PartitioningFilter(f"{stream}.*", (1,))
    pcgroups.sync.create_elastic(bjs, stream, "e", max_members=2, filters=[by_key])
    assert pcgroups.sync.add_members(bjs, stream, "e", ["a", "b"]).members == ("a", "b")
    assert pcgroups.sync.elastic_partition_filters(bjs, stream, "e", "a") == (f"0.{stream}.*",)
    assert pcgroups.sync.delete_members(bjs, stream, "e", ["b"]).members == ("a",)
    mapping = pcgroups.MemberMapping("a", (0, 1))
    assert pcgroups.sync.set_member_mappings(bjs, stream, "e", [mapping]).member_mappings
    assert not pcgroups.sync.delete_member_mappings(bjs, stream, "e").member_mappings
    assert pcgroups.sync.elastic_config(bjs, stream, "e").max_members == 2
    assert list(pcgroups.sync.list_elastic(bjs, stream)) == ["e"]
    assert pcgroups.sync.elastic_status(bjs, stream, "e").kind == "elastic"
    assert pcgroups.sync.elastic_active_members(bjs, stream, "e") == []
    with pytest.raises(pcgroups.GroupExistsError):
        pcgroups.sync.create_elastic(bjs, stream, "e", max_members=3, filters=[by_key])
    with pytest.raises(pcgroups.InvalidGroupNameError):
        pcgroups.sync.consume_elastic(bjs, stream, "bad group", "a")  # at once, as async
    pcgroups.sync.delete_elastic(bjs, stream, "e")
    with pytest.raises(pcgroups.GroupNotFoundError):
        pcgroups.sync.elastic_config(bjs, stream, "e")


def _watch_consumers(js: jetstream.sync.JetStream) -> set[str]:
    return set(js.consumer_names(f"KV_{STATIC_BUCKET}"))


def test_a_member_acks_from_a_thread_across_a_step_down_and_stops_on_leaving(
    bjs: jetstream.sync.JetStream, stream: str
) -> None:
    pcgroups.sync.create_static(bjs, stream, "g", max_members=1, members=["m1"])
    watches_before = _watch_consumers(bjs)
    received: queue.Queue[str] = queue.Queue()
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            with pcgroups.sync.consume_static(bjs, stream, "g", "m1") as member:
                for _ in range(2):  # a break does not stop it: iterate again for more
                    for n, msg in enumerate(member, 1):
                        assert isinstance(msg.raw, jetstream.sync.PullMessage)
                        msg.ack()
                        assert msg.settled
                        received.put(msg.subject)
                        if n == 2:
                            break
        except BaseException as exc:
            errors.append(exc)

    consumer = threading.Thread(target=consume)
    consumer.start()
    for key in ("k1", "k2"):
        bjs.publish(f"{stream}.{key}", b"x")
    assert [received.get(timeout=10) for _ in range(2)] == [f"{stream}.k1", f"{stream}.k2"]
    pcgroups.sync.static_step_down(bjs, stream, "g", "m1")  # the pin moves (to it again)
    for key in ("k3", "k4"):
        bjs.publish(f"{stream}.{key}", b"x")
    assert [received.get(timeout=10) for _ in range(2)] == [f"{stream}.k3", f"{stream}.k4"]
    consumer.join(10)
    assert not consumer.is_alive() and errors == []

    durable = bjs.consumer_info(stream, "g-m1")
    assert (durable.num_ack_pending, durable.num_pending) == (0, 0)  # every ack applied
    assert pins(durable) == set()  # released on leaving
    assert _watch_consumers(bjs) == watches_before  # the config watch is gone


def test_a_member_ends_with_the_async_errors(bjs: jetstream.sync.JetStream, stream: str) -> None:
    pcgroups.sync.create_static(bjs, stream, "g", max_members=1, members=["m1"])
    member = pcgroups.sync.consume_static(bjs, stream, "g", "m1")
    with pytest.raises(ClientValidationError):
        iter(member)  # not started
    with pytest.raises(pcgroups.MemberNotFoundError):
        pcgroups.sync.consume_static(bjs, stream, "g", "m9").start()
    ended: queue.Queue[BaseException | None] = queue.Queue()

    def consume() -> None:
        try:
            for _ in member:
                pass
            ended.put(None)
        except BaseException as exc:
            ended.put(exc)

    with member:
        thread = threading.Thread(target=consume)
        thread.start()
        pcgroups.sync.delete_static(bjs, stream, "g")
        assert isinstance(ended.get(timeout=10), pcgroups.GroupDeletedError)
        thread.join(10)
        with pytest.raises(pcgroups.GroupDeletedError):
            member.done()


def test_a_watch_group_delivers_a_blocking_buckets_changes(
    bjs: jetstream.sync.JetStream, unique_name: Callable[[str], str]
) -> None:
    bucket = kvstore.sync.create_bucket(bjs, unique_name("kv"), history=5)
    try:
        bucket.put("a", b"1")
        bucket.delete("a")
        with pytest.raises(ClientValidationError):
            pcgroups.sync.create_bucket_group(bucket.aio, "w", max_members=1)  # type: ignore[arg-type]
        pcgroups.sync.create_bucket_group(bucket, "w", max_members=1, members=["m1"])
        with pcgroups.sync.watch_group(bucket, "w", "m1") as changes:
            assert changes.bucket is bucket and changes.member == "m1"
            seen = []
            for change in changes:
                seen.append((change.key, change.value, change.revision, change.op))
                change.ack()
                if len(seen) == 2:
                    break
            assert changes.partitions == (0,)
        assert seen == [("a", b"1", 1, Op.PUT), ("a", b"", 2, Op.DELETE)]
        pcgroups.sync.delete_bucket_group(bucket, "w")
        with pytest.raises(pcgroups.GroupNotFoundError):
            pcgroups.sync.delete_bucket_group(bucket, "w")
    finally:
        with contextlib.suppress(kvstore.BucketNotFoundError):
            kvstore.sync.delete_bucket(bjs, bucket.name)
