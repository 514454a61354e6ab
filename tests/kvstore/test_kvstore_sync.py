"""kvstore.sync does what kvstore does, without ``async``: the bucket calls, batches that
commit on exit and abandon on an error, all-or-nothing put_many, watches fed from another
thread, typed views, encrypted buckets, and a bucket another client (the async API) wrote."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

import msgspec
import pytest

import jetstream
import jetstream.sync
import kvstore
import kvstore.sync
from tests.conftest import BucketFactory

pytestmark = pytest.mark.integration


class Profile(msgspec.Struct):
    name: str
    age: int


@pytest.fixture
def names(
    sync_js: jetstream.sync.JetStream, unique_name: Callable[[str], str]
) -> Iterator[Callable[[], str]]:
    made: list[str] = []

    def make() -> str:
        made.append(unique_name("b"))
        return made[-1]

    yield make
    for name in made:
        with contextlib.suppress(kvstore.BucketNotFoundError):
            kvstore.sync.delete_bucket(sync_js, name)


def test_bucket_calls_round_trip(
    sync_js: jetstream.sync.JetStream, names: Callable[[], str]
) -> None:
    bucket = kvstore.sync.create_bucket(sync_js, names(), history=5)
    first = bucket.put("alice.name", b"Alice", ttl="1h")
    assert bucket.create("alice.id", b"42") == first + 1
    assert bucket.update("alice.name", b"Al", revision=first) == first + 2
    assert bucket.get("alice.name").value == b"Al"
    assert bucket.get("alice.name", revision=first).value == b"Alice"
    assert [e.value for e in bucket.history("alice.name")] == [b"Alice", b"Al"]
    bucket.delete("alice.id")
    assert sorted(bucket.keys()) == ["alice.name"]
    assert bucket.get_many(["alice.name", "alice.id"])["alice.name"].value == b"Al"
    assert bucket.status().history == 5
    assert bucket.name in list(kvstore.sync.list_buckets(sync_js))
    assert kvstore.sync.update_bucket(sync_js, bucket.name, history=10).config.history == 10
    assert kvstore.sync.open_bucket(sync_js, bucket.name).get("alice.name").revision == first + 2


def test_put_many_is_all_or_nothing(
    sync_js: jetstream.sync.JetStream, names: Callable[[], str]
) -> None:
    bucket = kvstore.sync.create_bucket(sync_js, names())
    revisions = bucket.put_many({"a": b"1", "b": b"2"})
    with pytest.raises(kvstore.WrongRevisionError):
        bucket.put_many({"a": b"3", "c": b"4"}, expect={"a": revisions["a"] + 100})
    assert sorted(bucket.keys()) == ["a", "b"]
    assert bucket.get("a").value == b"1"


def test_a_batch_commits_on_exit_and_abandons_on_an_error(
    sync_js: jetstream.sync.JetStream, names: Callable[[], str]
) -> None:
    bucket = kvstore.sync.create_bucket(sync_js, names())
    with bucket.batch() as batch:
        batch.put("a", b"1")
        batch.put("b", b"2")
    assert sorted(bucket.keys()) == ["a", "b"]
    with pytest.raises(RuntimeError, match="stop"), bucket.batch() as batch:
        batch.put("c", b"3")
        raise RuntimeError("stop")
    assert sorted(bucket.keys()) == ["a", "b"]
    prepared = bucket.prepare_many({"d": b"4"})
    assert set(prepared.commit()) == {"d"}


def test_a_watch_sees_the_snapshot_then_changes_made_by_another_thread(
    sync_js: jetstream.sync.JetStream, names: Callable[[], str]
) -> None:
    bucket = kvstore.sync.create_bucket(sync_js, names())
    bucket.put("alice.name", b"Alice")
    with bucket.watch("alice.>") as watcher:
        assert [e.value for e in watcher.initial()] == [b"Alice"]
        assert watcher.initial_done
        writer = threading.Thread(target=lambda: bucket.delete("alice.name"))
        writer.start()
        change = next(iter(watcher))
        writer.join()
    assert (change.key, change.op) == ("alice.name", kvstore.Op.DELETE)


def test_typed_views_and_encrypted_buckets(
    sync_js: jetstream.sync.JetStream, names: Callable[[], str]
) -> None:
    keyring = jetstream.Keyring({"k1": bytes(range(32))}, primary="k1")
    bucket = kvstore.sync.create_bucket(sync_js, names(), encryption=keyring)
    profiles = bucket.typed(Profile)
    profiles.put("p.1", Profile("Ada", 36))
    assert profiles.get("p.1").value == Profile("Ada", 36)
    assert profiles.bucket is bucket
    assert [e.value for e in profiles.history("p.1")] == [Profile("Ada", 36)]
    with pytest.raises(kvstore.ValueEncodeError):
        profiles.put("p.2", "not a profile")  # type: ignore[arg-type]
    other = jetstream.Keyring({"k2": bytes(32)}, primary="k2")
    wrong_key = kvstore.sync.open_bucket(sync_js, bucket.name, encryption=other)
    with pytest.raises(jetstream.UnknownKeyIdError):
        wrong_key.get("p.1")  # the same refusal as the async API's


async def test_reads_what_the_async_api_wrote(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer
) -> None:
    async_bucket = await make_bucket(history=3)
    await async_bucket.put_many({"x": b"1", "y": b"2"})

    def read() -> dict[str, bytes]:
        with jetstream.sync.connect(nats_server.url) as js:
            bucket = kvstore.sync.open_bucket(js, async_bucket.name)
            return {key: bucket.get(key).value for key in bucket.keys()}

    # A test running in an event loop: the blocking client is usable there too.
    assert read() == {"x": b"1", "y": b"2"}


def test_errors_name_the_bucket(sync_js: jetstream.sync.JetStream) -> None:
    with pytest.raises(kvstore.BucketNotFoundError, match="no_such_bucket"):
        kvstore.sync.open_bucket(sync_js, "no_such_bucket")
    with pytest.raises(jetstream.InvalidBucketNameError):
        kvstore.sync.create_bucket(sync_js, "bad name")
