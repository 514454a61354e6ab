"""KV watch groups on a real server: members sharing a bucket's changes (puts, deletes,
purges, TTL expiries over 500 keys) get every change the group's stream sourced, each key's
changes in revision order and never on two members at once, with ``op`` and ``revision`` as
``bucket.watch`` reports them; a member cancelled mid-flow and a member process killed with
SIGKILL lose nothing; encrypted values are decrypted, codec keys decoded; what sourcing does
with TTL, marker and rollup headers (docs/PCGROUPS-WIRE.md section 12); bad input is refused
with typed errors before anything is written."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import os
import pathlib
import random
import sys
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import pytest

import jetstream
import kvstore
import pcgroups
from kvstore import Op
from tests.conftest import BucketFactory

pytestmark = pytest.mark.integration
KEYS = 500
ACK_WAIT = 2.0  # seconds: short, so takeovers are quick in tests
DEADLINE = 30.0
EXP = Op.EXPIRED


@dataclasses.dataclass
class Write:
    key: str
    revision: int
    op: Op
    rollup: bool  # removes the key's earlier revisions from the bucket (purge, TTL put)


@dataclasses.dataclass
class Journal:
    """What every member did: per key, (revision, op, member, start, end) in start order."""

    entries: dict[str, list[tuple[int, Op, str, float, float]]] = dataclasses.field(
        default_factory=dict
    )
    active: dict[str, str] = dataclasses.field(default_factory=dict)
    overlaps: list[str] = dataclasses.field(default_factory=list)

    def handler(self, member: str) -> Callable[[pcgroups.KeyChange], object]:
        async def handle(change: pcgroups.KeyChange) -> None:
            if change.key in self.active:  # another member is still working on this key
                self.overlaps.append(f"{change.key}: {self.active[change.key]} and {member}")
            self.active[change.key] = member
            start = time.monotonic()
            try:
                await asyncio.sleep(random.uniform(0, 0.002))
            finally:  # a cancelled member stops working on the key (the change is not acked)
                del self.active[change.key]
            item = (change.revision, change.op, member, start, time.monotonic())
            self.entries.setdefault(change.key, []).append(item)
            await change.ack()

        return handle

    def processed(self) -> dict[int, tuple[str, Op]]:
        return {rev: (key, op) for key, items in self.entries.items() for rev, op, *_ in items}

    def check_order(self) -> None:
        assert not self.overlaps
        for key, items in self.entries.items():
            first_seen = list(dict.fromkeys(rev for rev, *_ in items))
            assert first_seen == sorted(first_seen), f"{key} out of order: {first_seen}"
            for (*_, end), (_, _, _, start, _) in itertools.pairwise(items):
                assert start >= end, f"{key}: two members at once"


async def wait_for(condition: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def droppable(writes: list[Write]) -> set[int]:
    """Revisions the bucket itself may remove before the group's stream reads them: those
    followed by a rollup of their key (purge, TTL put) and TTL puts (they expire)."""
    result: set[int] = set()
    by_key: dict[str, list[Write]] = {}
    for w in writes:
        by_key.setdefault(w.key, []).append(w)
    for items in by_key.values():
        for i, w in enumerate(items):
            if (w.op is Op.PUT and w.rollup) or any(later.rollup for later in items[i + 1 :]):
                result.add(w.revision)
    return result


@pytest.fixture
async def conns(nats_server: jetstream.EmbeddedServer) -> AsyncIterator[list[jetstream.JetStream]]:
    """Three more connections: one per member, as separate clients."""
    async with contextlib.AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(await jetstream.connect(nats_server.url))
            for _ in range(3)
        ]


@pytest.fixture
async def groups(js: jetstream.JetStream) -> AsyncIterator[list[kvstore.Bucket]]:
    """Buckets whose watch groups are deleted after the test (before the buckets are)."""
    buckets: list[kvstore.Bucket] = []
    yield buckets
    for bucket in buckets:
        async for group in pcgroups.list_elastic(js, bucket.stream):
            with contextlib.suppress(jetstream.JetStreamError):
                await pcgroups.delete_bucket_group(bucket, group)


def template() -> jetstream.ConsumerConfig:
    return jetstream.ConsumerConfig(ack_wait=ACK_WAIT)


async def run_member(
    conn: jetstream.JetStream, bucket: str, member: str, journal: Journal, *, iterate: bool
) -> None:
    handle = journal.handler(member)
    own = await kvstore.open_bucket(conn, bucket)
    if iterate:
        async with pcgroups.watch_group(own, "g", member, config=template()) as watch:
            async for change in watch:
                await handle(change)  # type: ignore[misc]
    else:
        async with pcgroups.watch_group(own, "g", member, handle, config=template()) as watch:
            await watch.done()


async def write_changes(
    bucket: kvstore.Bucket, rng: random.Random, count: int, writes: list[Write]
) -> None:
    for _ in range(count):
        key = f"k{rng.randrange(KEYS)}"
        roll = rng.random()
        if roll < 0.7:
            writes.append(Write(key, await bucket.put(key, b"v%d" % len(writes)), Op.PUT, False))
        elif roll < 0.85:
            writes.append(Write(key, await bucket.delete(key), Op.DELETE, False))
        else:
            writes.append(Write(key, await bucket.purge(key), Op.PURGE, True))


async def test_three_members_get_every_change_in_order_across_a_cancelled_member(
    js: jetstream.JetStream,
    conns: list[jetstream.JetStream],
    make_bucket: BucketFactory,
    groups: list[kvstore.Bucket],
) -> None:
    bucket = await make_bucket(history=64, marker_ttl=timedelta(seconds=1))
    groups.append(bucket)
    names = ["m1", "m2", "m3"]
    await pcgroups.create_bucket_group(bucket, "g", max_members=6, members=names)
    journal = Journal()
    tasks = [
        asyncio.create_task(run_member(conn, bucket.name, name, journal, iterate=name == "m3"))
        for conn, name in zip(conns, names, strict=True)
    ]
    rng = random.Random(14)
    writes: list[Write] = []
    try:
        for i in range(KEYS):  # every key once, then puts, deletes and purges at random
            writes.append(Write(f"k{i}", await bucket.put(f"k{i}", b"first"), Op.PUT, False))
        await write_changes(bucket, rng, 400, writes)
        await wait_for(lambda: any(m == "m3" for _, _, m, *_ in _all(journal)), "m3 works")
        tasks[2].cancel()  # m3 goes away mid-flow; its partitions move to m1 and m2
        await asyncio.wait({tasks[2]})
        await pcgroups.delete_members(js, bucket.stream, "g", ["m3"])
        ttl_keys = [f"t{i}" for i in range(10)]
        for key in ttl_keys:  # expire 1 s from now: the server writes EXPIRED markers
            writes.append(Write(key, await bucket.put(key, b"ttl", ttl=1), Op.PUT, True))
        await write_changes(bucket, rng, 1100, writes)

        def expired() -> set[str]:
            return {
                k for k in ttl_keys for _, op, *_ in journal.entries.get(k, ()) if op is Op.EXPIRED
            }

        await wait_for(lambda: expired() == set(ttl_keys), "EXPIRED of every TTL key")
        last = (await js.stream_info(bucket.stream)).state.last_seq
        allowed = droppable(writes)
        await wait_for(
            lambda: set(range(1, last + 1)) - set(journal.processed()) <= allowed, "every change"
        )
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
    journal.check_order()
    processed = journal.processed()
    written = {w.revision: (w.key, w.op) for w in writes}
    for revision, (key, op) in processed.items():  # key and op as bucket.watch reports them
        expected = written.get(revision, (key, Op.EXPIRED))
        assert (key, op) == expected, f"revision {revision}"
    missing = set(range(1, last + 1)) - set(processed)
    print(f"{len(writes)} writes, {len(processed)} changes processed, skipped: {sorted(missing)}")
    assert missing <= allowed  # only revisions the bucket itself dropped before sourcing
    # each key's latest change (value, tombstone or marker) was processed, and last
    async with bucket.watch() as watcher:
        async for entry in watcher:
            assert max(r for r, *_ in journal.entries[entry.key]) == entry.revision, entry.key
            if watcher.initial_done.is_set():
                break
    owners = {key: {m for _, _, m, *_ in items} for key, items in journal.entries.items()}
    assert any(len(members) > 1 for members in owners.values())  # m3's keys moved
    info = await js.stream_info(pcgroups.wire.elastic_stream_name(bucket.stream, "g"))
    assert info.state.messages == 0  # the work queue is empty: everything acknowledged


def _all(journal: Journal) -> list[tuple[int, Op, str, float, float]]:
    return [item for items in journal.entries.values() for item in items]


class MemberProcess:
    """A watch-group member in a child process (``kvg_member_process.py``), read line by
    line into ``starts`` / ``ends``: (key, revision, op, delivered, monotonic time)."""

    def __init__(self, proc: asyncio.subprocess.Process, label: str) -> None:
        self.proc = proc
        self.label = label
        self.starts: list[tuple[str, int, str, int, float]] = []
        self.ends: list[tuple[str, int, str, int, float]] = []
        self.ready = asyncio.Event()
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, url: str, bucket: str, member: str, label: str) -> MemberProcess:
        script = pathlib.Path(__file__).with_name("kvg_member_process.py")
        root = script.parent.parent.parent
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            url,
            bucket,
            "g",
            member,
            str(ACK_WAIT),
            stdout=asyncio.subprocess.PIPE,
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
        return cls(proc, label)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            words = line.decode().split()
            if words[:1] == ["ready"]:
                self.ready.set()
            elif words[:1] in (["start"], ["end"]):
                item = (words[1], int(words[2]), words[3], int(words[4]), float(words[5]))
                (self.starts if words[0] == "start" else self.ends).append(item)

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()  # SIGKILL: no goodbye, no nak, the pin stays until it times out
        await self.proc.wait()
        await self.reader

    def intervals(self, killed_at: float) -> list[tuple[str, int, str, float, float]]:
        """(key, revision, who, start, end); a change it was working on when killed ends
        at the kill."""
        ends = {(k, r, d): t for k, r, _, d, t in self.ends}
        return [
            (k, r, self.label, t, ends.get((k, r, d), killed_at)) for k, r, _, d, t in self.starts
        ]


async def test_a_killed_member_process_loses_nothing(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    make_bucket: BucketFactory,
    groups: list[kvstore.Bucket],
) -> None:
    """m2 runs in a child process that is killed with SIGKILL mid-flow; another instance of
    m2 takes over its partitions (pinned failover) and every change is processed, in order
    per key, never by two members at once."""
    bucket = await make_bucket(history=64)
    groups.append(bucket)
    await pcgroups.create_bucket_group(bucket, "g", max_members=4, members=["m1", "m2"])
    journal = Journal()
    rng = random.Random(9)
    writes: list[Write] = []
    a = await MemberProcess.start(nats_server.url, bucket.name, "m2", "a")
    b = None
    m1 = asyncio.create_task(run_member(js, bucket.name, "m1", journal, iterate=False))
    try:
        await asyncio.wait_for(a.ready.wait(), DEADLINE)
        await write_changes(bucket, rng, 300, writes)
        await wait_for(lambda: len(a.ends) >= 20, "a works")
        b = await MemberProcess.start(nats_server.url, bucket.name, "m2", "b")
        await asyncio.wait_for(b.ready.wait(), DEADLINE)
        await write_changes(bucket, rng, 100, writes)
        killed_at = time.monotonic()
        await a.kill()
        assert not b.starts  # b waited while a held the pin
        await write_changes(bucket, rng, 300, writes)
        last = writes[-1].revision
        allowed = droppable(writes)

        def done() -> set[int]:
            assert b is not None
            return set(journal.processed()) | {r for _, r, *_ in a.ends + b.ends}

        await wait_for(lambda: set(range(1, last + 1)) - done() <= allowed, "every change")
        takeover = min(t for *_, t in b.starts) - killed_at
    finally:
        m1.cancel()
        await asyncio.wait({m1})
        await a.kill()
        if b is not None:
            await b.kill()
    skipped = sorted(set(range(1, last + 1)) - done())
    print(f"kill -9 takeover after {takeover:.3f}s; skipped {skipped}")
    # the pin times out priority_timeout (= ack_wait) after a's last pull; b's next pull (at
    # most a pull expiry later) is pinned
    assert takeover < ACK_WAIT + 2 * max(ACK_WAIT / 2, 1.0)
    journal.check_order()  # m1's own keys
    per_key: dict[str, list[tuple[int, str, float, float]]] = {}
    for key, revision, who, start, end in a.intervals(killed_at) + b.intervals(killed_at):
        per_key.setdefault(key, []).append((revision, who, start, end))
    for key, items in per_key.items():
        items.sort(key=lambda item: item[2])
        first_seen = list(dict.fromkeys(r for r, *_ in items))
        assert first_seen == sorted(first_seen), f"{key} out of order: {items}"
        for (*_, end), (_, _, start, _) in itertools.pairwise(items):
            assert start >= end, f"{key}: a and b at once: {items}"
        assert key not in journal.entries  # m1 never had m2's keys
    # only the one change a had received but not acknowledged (max_ack_pending=1) came
    # again: it is newer than every change a finished (the work queue hands out m2's
    # partitions in revision order)
    redelivered = [r for _, r, _, d, _ in b.starts if d > 1]
    assert len(redelivered) <= 1
    assert all(r >= max(r for _, r, *_ in a.ends) for r in redelivered)


async def test_bad_input_is_refused_before_anything_is_written(
    js: jetstream.JetStream, make_bucket: BucketFactory, groups: list[kvstore.Bucket]
) -> None:
    bucket = await make_bucket()
    groups.append(bucket)
    refused: list[tuple[type[Exception], object, str, dict[str, object]]] = [
        (jetstream.ClientValidationError, "b", "g", {"max_members": 2}),
        (pcgroups.InvalidGroupNameError, bucket, "a.b", {"max_members": 2}),
        (pcgroups.InvalidGroupConfigError, bucket, "g", {"max_members": 0}),
        (pcgroups.InvalidGroupConfigError, bucket, "g", {"max_members": True}),
        (
            pcgroups.InvalidGroupConfigError,
            bucket,
            "g",
            {"max_members": 2, "max_buffered_msgs": -1},
        ),
        (pcgroups.InvalidGroupNameError, bucket, "g", {"max_members": 2, "members": ["a b"]}),
        (pcgroups.InvalidGroupConfigError, bucket, "g", {"max_members": 2, "members": ["m", "m"]}),
        (pcgroups.InvalidGroupConfigError, bucket, "g", {"max_members": 2, "members": "m1"}),
    ]
    for error, target, group, options in refused:
        with pytest.raises(error):
            await pcgroups.create_bucket_group(target, group, **options)  # type: ignore[arg-type]
    assert [g async for g in pcgroups.list_elastic(js, bucket.stream)] == []
    with pytest.raises(jetstream.StreamNotFoundError):  # no work-queue stream either
        await js.stream_info(pcgroups.wire.elastic_stream_name(bucket.stream, "g"))
    with pytest.raises(jetstream.ClientValidationError):
        pcgroups.watch_group("b", "g", "m1")  # type: ignore[arg-type]
    with pytest.raises(pcgroups.InvalidGroupNameError):
        pcgroups.watch_group(bucket, "g", "a.b")
    with pytest.raises(jetstream.ClientValidationError):
        pcgroups.watch_group(bucket, "g", "m1", config="fast")  # type: ignore[arg-type]
    with pytest.raises(pcgroups.GroupNotFoundError):
        async with pcgroups.watch_group(bucket, "g", "m1"):
            pass
    with pytest.raises(pcgroups.GroupNotFoundError):
        await pcgroups.delete_bucket_group(bucket, "g")
    # an existing group keeps its partitioning; a deleted bucket gets no group
    config = await pcgroups.create_bucket_group(bucket, "g", max_members=2, members=["m1"])
    assert config.partitioning_filters == (pcgroups.wire.bucket_group_filter(bucket.name),)
    assert await pcgroups.create_bucket_group(bucket, "g", max_members=2) == config
    with pytest.raises(pcgroups.GroupExistsError):
        await pcgroups.create_bucket_group(bucket, "g", max_members=3)
    assert await pcgroups.elastic_config(js, bucket.stream, "g") == config
    watch = pcgroups.watch_group(bucket, "g", "m1", lambda change: None)
    with pytest.raises(jetstream.ClientValidationError):
        aiter(watch)
    now = datetime.now(UTC)
    for subject in ("$KV.other.k", f"$KV.{bucket.name}.", "k"):  # not a key of this bucket
        with pytest.raises(kvstore.KeyDecodeError):
            bucket.decode_entry(subject, b"", revision=1, created=now, headers={})
    await kvstore.delete_bucket(js, bucket.name)
    with pytest.raises(kvstore.BucketNotFoundError):
        await pcgroups.create_bucket_group(bucket, "h", max_members=2)
    assert [g async for g in pcgroups.list_elastic(js, bucket.stream)] == ["g"]


async def test_encrypted_values_and_codec_keys_arrive_decoded(
    js: jetstream.JetStream, make_bucket: BucketFactory, groups: list[kvstore.Bucket]
) -> None:
    ring = jetstream.Keyring({"k1": os.urandom(32)}, primary="k1")
    # history 5: the group's work queue sources the bucket's stream asynchronously, and in a
    # history-1 bucket the delete below may be replaced by the next put before it is sourced
    bucket = await make_bucket(key_codec=kvstore.Base64KeyCodec(), encryption=ring, history=5)
    groups.append(bucket)
    await pcgroups.create_bucket_group(bucket, "g", max_members=2, members=["m1"])
    other_ring = jetstream.Keyring({"k1": os.urandom(32)}, primary="k1")
    other = await kvstore.open_bucket(
        js, bucket.name, key_codec=kvstore.Base64KeyCodec(), encryption=other_ring
    )
    plain = await kvstore.open_bucket(js, bucket.name)
    first = await bucket.put("Acme Inc.contact", b"secret")
    wrong = await other.put("mallory", b"sealed with another key")
    await plain.put("not=base64", b"foreign")  # a key the codec did not write
    await bucket.delete("Acme Inc.contact")
    last = await bucket.put("Acme Inc.contact", b"again")
    seen: list[tuple[str, int, Op, bytes | None]] = []
    async with pcgroups.watch_group(bucket, "g", "m1", config=template()) as watch:
        async for change in watch:
            try:
                seen.append((change.key, change.revision, change.op, change.value))
                await change.ack()
            except jetstream.DecryptionError:
                seen.append((change.key, change.revision, change.op, None))
                await change.term()  # a change whose value does not open can be settled
            if change.revision == last:
                break
    assert seen == [
        ("Acme Inc.contact", first, Op.PUT, b"secret"),
        ("mallory", wrong, Op.PUT, None),
        ("Acme Inc.contact", first + 3, Op.DELETE, b""),  # the foreign key was skipped
        ("Acme Inc.contact", last, Op.PUT, b"again"),
    ]


async def test_sourcing_keeps_ttl_marker_and_rollup_headers_and_applies_none(
    js: jetstream.JetStream, make_bucket: BucketFactory, groups: list[kvstore.Bucket]
) -> None:
    """The facts the watch group relies on (nats-server 2.15.1), read from the work queue
    itself: every copy keeps the bucket's headers and gets ``Nats-Stream-Source`` with its
    revision; ``Nats-TTL`` and ``Nats-Rollup`` are stored but not applied there (the stream
    allows neither), so a purge does not remove the key's earlier changes and a TTL'd value
    stays until processed; the server's expiry marker is sourced like any message;
    ``Nats-Expected-*`` is dropped."""
    bucket = await make_bucket(history=5, marker_ttl=timedelta(seconds=1))
    groups.append(bucket)
    await pcgroups.create_bucket_group(bucket, "g", max_members=3)  # no members: it fills up
    queue = pcgroups.wire.elastic_stream_name(bucket.stream, "g")
    revisions = [
        await bucket.put("k", b"1"),
        await bucket.put("a.b.c.d.e", b"deep"),  # any number of tokens
        await bucket.purge("k"),
        await bucket.put("t", b"short-lived", ttl=1),
    ]
    revisions.append(await bucket.update("a.b.c.d.e", b"cas", revisions[1]))
    while (await js.stream_info(queue)).state.messages < 6:  # the marker, after 1 s
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.5)  # the TTL'd copy is older than its TTL by now: still there
    copies = [await js.get_message(queue, seq) for seq in range(1, 7)]
    marker = copies[5]
    revisions.append(pcgroups.origin_revision(marker.headers))
    assert [pcgroups.origin_revision(c.headers) for c in copies] == revisions
    for copy in copies:
        token, _, subject = copy.subject.partition(".")
        assert int(token) == pcgroups.wire.hash_partition(subject.encode(), 3)
        assert copy.headers["Nats-Stream-Source"].split(" ")[0] == bucket.stream
        assert not any(h.startswith("Nats-Expected-") for h in copy.headers)
    assert copies[0].data == b"1"  # not removed by the purge's rollup
    assert copies[2].headers["KV-Operation"] == "PURGE"
    assert copies[2].headers["Nats-Rollup"] == "sub"
    assert copies[3].headers["Nats-TTL"] == "1"
    assert copies[3].data == b"short-lived"
    assert marker.subject.endswith(f"$KV.{bucket.name}.t")
    assert marker.headers["Nats-Marker-Reason"] == "MaxAge"
    assert "Nats-TTL" in marker.headers
    assert marker.data == b""
    assert (await js.stream_info(queue)).state.messages == 6


async def test_star_filters_would_drop_deeper_keys(
    js: jetstream.JetStream, make_bucket: BucketFactory, groups: list[kvstore.Bucket]
) -> None:
    """Why a watch group hashes the whole subject: partitioning filters made of ``*`` tokens
    (one per key length) source only keys of those lengths; a deeper key never reaches the
    group, silently."""
    bucket = await make_bucket()
    groups.append(bucket)
    stars = [
        pcgroups.PartitioningFilter(f"$KV.{bucket.name}.*", [1]),
        pcgroups.PartitioningFilter(f"$KV.{bucket.name}.*.*", [1, 2]),
    ]
    await pcgroups.create_elastic(js, bucket.stream, "stars", max_members=3, filters=stars)
    await pcgroups.create_bucket_group(bucket, "whole", max_members=3)
    for key in ("a.b.c", "a", "a.b"):  # the deep key first: sourcing keeps this order
        await bucket.put(key, b"x")
    copies: dict[str, list[str]] = {}
    for group in ("stars", "whole"):
        queue = pcgroups.wire.elastic_stream_name(bucket.stream, group)
        while (await js.stream_info(queue)).state.last_seq < (2 if group == "stars" else 3):
            await asyncio.sleep(0.02)
        last = (await js.stream_info(queue)).state.last_seq
        messages = [await js.get_message(queue, seq) for seq in range(1, last + 1)]
        copies[group] = [m.subject.split(".", 3)[3] for m in messages]
    assert copies == {"stars": ["a", "a.b"], "whole": ["a.b.c", "a", "a.b"]}


def test_origin_revision_reads_every_header_form() -> None:
    source = "Nats-Stream-Source"
    current = "KV_b 12 $KV.b.> {{Partition(4)}}.$KV.b.> $KV.b.a ebqg0kTw"
    assert pcgroups.origin_revision({source: current}) == 12
    assert pcgroups.origin_revision({source: "KV_b:hash 7 $KV.b.> x $KV.b.a"}) == 7
    assert pcgroups.origin_revision({source: "KV_b 9"}) == 9
    old = "$JS.ACK.KV_b.src.1.33.30.1700000000000000000.0"  # before 2.10: the ack reply
    assert pcgroups.origin_revision({source: old}) == 33
    for bad in ("", "KV_b", "KV_b x", "KV_b 0 a b c", "$JS.ACK.bad"):
        assert pcgroups.origin_revision({source: bad}) is None
    assert pcgroups.origin_revision({}) is None
