"""``jetstore cg``: every verb as a subprocess against a real server, checking its output,
what it stored (read back through pcgroups) and its exit code."""

from __future__ import annotations

import asyncio
import json
import queue
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable

import pytest

import jetstream
import kvstore
import pcgroups
from tests.conftest import BucketFactory
from tests.pcgroups.group_streams import group_stream
from tests.pcgroups.running_group_members import create_groups

from .cli_helpers import cli_command, cli_env, jetstore, jetstore_all

pytestmark = pytest.mark.integration


class Running:
    """A long-running ``jetstore`` (consume, watch) whose stdout lines are read with a
    deadline (a thread reads them: a blocked readline cannot time out)."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            cli_command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env()
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)

    def line(self, timeout: float = 20) -> str:
        return self._lines.get(timeout=timeout).decode()

    def end(self, timeout: float = 20) -> tuple[int, list[str], str]:
        """Wait for the exit: code, the stdout lines not read yet, stderr."""
        try:
            _, err = self.process.communicate(timeout=timeout)
        finally:
            self.kill()
        self._reader.join(5)
        rest = []
        while not self._lines.empty():
            rest.append(self._lines.get().decode())
        return self.process.returncode, rest, err.decode()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


@pytest.fixture
async def partitioned(
    js: jetstream.JetStream, unique_name: Callable[[str], str]
) -> AsyncIterator[str]:
    """A stream whose ``<s>.<key>`` messages are stored as ``<p>.<s>.<key>`` (4 partitions),
    for static groups; its groups and the stream are removed after the test."""
    async with group_stream(js, unique_name("cgs"), partitions=4) as name:
        yield name


@pytest.fixture
async def orders(js: jetstream.JetStream, unique_name: Callable[[str], str]) -> AsyncIterator[str]:
    """A plain stream ``<s>.<customer>`` for elastic groups, removed with its groups."""
    async with group_stream(js, unique_name("cge")) as name:
        yield name


async def test_static_create_ls_info_consume_delete(
    js: jetstream.JetStream, nats_server: jetstream.EmbeddedServer, partitioned: str
) -> None:
    url = ("--server", nats_server.url)
    stream = partitioned
    created = jetstore(
        "cg", "static", "create", stream, "g", "4", "m1", "m2", "--filter", f"{stream}.*",
        "--json", *url,
    )  # fmt: skip
    assert created.code == 0, created.err
    assert json.loads(created.out) == {
        "kind": "static",
        "stream": stream,
        "group": "g",
        "max_members": 4,
        "filters": [f"{stream}.*"],
        "members": ["m1", "m2"],
        "member_mappings": [],
        "partitions": {"m1": [0, 1], "m2": [2, 3]},
    }
    assert await pcgroups.static_config(js, stream, "g") == pcgroups.StaticConfig(
        max_members=4, filters=(f"{stream}.*",), members=("m1", "m2")
    )

    again, other, both, bad_mapping, mapped, bad_name = jetstore_all(
        ("cg", "static", "create", stream, "g", "4", "m1", "m2", "--filter", f"{stream}.*", *url),
        ("cg", "static", "create", stream, "g", "4", "m1", *url),
        ("cg", "static", "create", stream, "x", "2", "m1", "--mapping", "m1:0,1", *url),
        ("cg", "static", "create", stream, "x", "2", "--mapping", "m1=0", *url),
        ("cg", "static", "create", stream, "mapped", "2", "--mapping", "a:1", "--mapping", "b:0",
         *url),
        ("cg", "static", "info", stream, "bad.group", *url),
    )  # fmt: skip
    assert again.code == 0 and "partitions: m1:0,1 m2:2,3\n" in again.text
    assert other.code == 1 and other.err.startswith("jetstore: error: GroupExistsError")
    assert both.code == 2 and "InvalidGroupConfigError" in both.err
    assert bad_mapping.code == 2 and "MEMBER:PARTITION" in bad_mapping.err
    assert mapped.code == 0 and "member_mappings: a:1 b:0\n" in mapped.text
    assert bad_name.code == 2 and "InvalidGroupNameError" in bad_name.err
    assert len(bad_name.err.strip().splitlines()) == 1  # one line, no traceback
    assert [g async for g in pcgroups.list_static(js, stream)] == [
        "g",
        "mapped",
    ]  # nothing else written

    for key in ("alice", "bob", "carol", "dave", "erin", "frank"):
        await js.publish(f"{stream}.{key}", f"order of {key}".encode())
    # m1's messages (partitions 0 and 1), in stream order
    expected = [m for m in await _stored(js, stream) if m.split(".", 1)[0] in ("0", "1")]
    consumed = jetstore(
        "cg", "static", "consume", stream, "g", "m1", "--count", str(len(expected)), *url
    )
    assert consumed.code == 0, consumed.err
    lines = consumed.text.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        f"{p.split('.', 1)[0]} {p.split('.', 1)[1]}" for p in expected
    ]
    key = lines[0].split(":")[0].rsplit(".", 1)[1]
    assert lines[0].endswith(f": order of {key}")
    info = await js.consumer_info(stream, "g-m1")
    assert info.num_ack_pending == 0 and info.num_pending == 0  # acked once printed

    listed, shown, active, no_consumer, not_member, outsider = jetstore_all(
        ("cg", "static", "ls", stream, "--json", *url),
        ("cg", "static", "info", stream, "g", "--json", *url),
        ("cg", "static", "active", stream, "g", *url),
        ("cg", "static", "step-down", stream, "g", "m2", *url),
        ("cg", "static", "step-down", stream, "g", "nobody", *url),
        ("cg", "static", "consume", stream, "g", "nobody", "--count", "1", *url),
    )
    assert json.loads(listed.out) == ["g", "mapped"]
    assert json.loads(shown.out)["active"] == []  # no instance runs now
    assert active.code == 0 and active.text == ""
    assert no_consumer.code == 1 and "ConsumerNotFoundError" in no_consumer.err
    assert not_member.code == 1 and "MemberNotFoundError" in not_member.err
    assert outsider.code == 1 and "MemberNotFoundError" in outsider.err  # static: fixed members

    refused, deleted = jetstore_all(
        ("cg", "static", "delete", stream, "g", *url),  # not a terminal: --force needed
        ("cg", "static", "delete", stream, "mapped", "-f", *url),
    )
    assert refused.code == 2 and "--force" in refused.err
    assert deleted.code == 0 and deleted.text == "deleted static group mapped\n"
    assert [g async for g in pcgroups.list_static(js, stream)] == ["g"]
    gone = jetstore("cg", "static", "info", stream, "mapped", *url)
    assert gone.code == 1 and "GroupNotFoundError" in gone.err


async def _stored(js: jetstream.JetStream, stream: str) -> list[str]:
    """The stored subjects, in order, with their partition token."""
    info = await js.stream_info(stream)
    return [
        (await js.get_message(stream, seq, direct=False)).subject
        for seq in range(info.state.first_seq, info.state.last_seq + 1)
    ]


async def test_elastic_membership_mappings_and_a_running_member(
    js: jetstream.JetStream, nats_server: jetstream.EmbeddedServer, orders: str
) -> None:
    url = ("--server", nats_server.url)
    stream = orders
    created = jetstore(
        "cg", "elastic", "create", stream, "ship", "4", "--filter", f"{stream}.*:1",
        "--max-buffered-msgs", "1000", "--json", *url,
    )  # fmt: skip
    assert created.code == 0, created.err
    fields = json.loads(created.out)
    assert fields["filters"] == [{"filter": f"{stream}.*", "wildcards": [1]}]
    assert fields["max_buffered_msgs"] == 1000 and fields["members"] == []

    added = jetstore("cg", "elastic", "add", stream, "ship", "a", "b", "c", *url)
    assert added.code == 0 and "partitions: a:0,3 b:1 c:2\n" in added.text, added.err
    dropped, bad_filter, no_stream = jetstore_all(
        ("cg", "elastic", "drop", stream, "ship", "c", *url),
        ("cg", "elastic", "create", stream, "x", "2", "--filter", f"{stream}.*:2", *url),
        ("cg", "elastic", "create", "NO_SUCH_STREAM", "x", "2", *url),
    )
    assert dropped.code == 0 and "partitions: a:0,1 b:2,3\n" in dropped.text
    assert bad_filter.code == 2 and "InvalidPartitioningFilterError" in bad_filter.err
    assert no_stream.code == 1 and "StreamNotFoundError" in no_stream.err
    assert (await pcgroups.elastic_config(js, stream, "ship")).members == ("a", "b")
    assert [g async for g in pcgroups.list_elastic(js, stream)] == ["ship"]

    for customer in ("alice", "bob", "carol", "dave"):
        await js.publish(f"{stream}.{customer}", customer.encode())
    # a owns partitions 0-1: take one message, then keep running until Ctrl-C
    member = Running("cg", "elastic", "consume", stream, "ship", "a", "--json", *url)
    try:
        first = json.loads(member.line())
        assert set(first) == {
            "partition", "subject", "stream_sequence", "delivered", "size", "data", "data_base64"
        }  # fmt: skip
        assert first["partition"] in (0, 1) and first["subject"].startswith(f"{stream}.")
        assert first["data"] == first["subject"].rsplit(".", 1)[1]
        active, stepped = jetstore_all(
            ("cg", "elastic", "active", stream, "ship", "--json", *url),
            ("cg", "elastic", "step-down", stream, "ship", "a", *url),
        )
        assert json.loads(active.out) == ["a"]
        assert stepped.code == 0 and stepped.text == "a stepped down\n", stepped.err
        member.process.send_signal(signal.SIGINT)  # Ctrl-C: the normal end
        code, _, err = member.end()
    finally:
        member.kill()
    assert code == 0, err

    mapped, wrong = jetstore_all(
        ("cg", "elastic", "mappings", "set", stream, "ship", "a:0,1,2", "b:3", *url),
        ("cg", "elastic", "mappings", "set", stream, "ship", "a:0", *url),
    )
    assert mapped.code == 0 and "member_mappings: a:0,1,2 b:3\n" in mapped.text, mapped.err
    assert wrong.code == 2 and "InvalidMemberMappingError" in wrong.err
    config = await pcgroups.elastic_config(js, stream, "ship")
    assert config.members == () and config.member_mappings == (
        pcgroups.MemberMapping("a", (0, 1, 2)),
        pcgroups.MemberMapping("b", (3,)),
    )
    cleared = jetstore("cg", "elastic", "mappings", "delete", stream, "ship", "--json", *url)
    assert cleared.code == 0 and json.loads(cleared.out)["member_mappings"] == []
    assert (await pcgroups.elastic_config(js, stream, "ship")).member_mappings == ()

    deleted = jetstore("cg", "elastic", "delete", stream, "ship", "-f", *url)
    assert deleted.code == 0 and deleted.text == "deleted elastic group ship\n"
    assert [g async for g in pcgroups.list_elastic(js, stream)] == []
    with pytest.raises(jetstream.StreamNotFoundError):  # its work queue went with it
        await js.stream_info(f"{stream}-ship")
    again = jetstore("cg", "elastic", "delete", stream, "ship", "-f", *url)
    assert again.code == 1 and "GroupNotFoundError" in again.err


async def test_consume_no_ack_gives_back_and_a_deleted_group_ends_it(
    js: jetstream.JetStream, nats_server: jetstream.EmbeddedServer, orders: str
) -> None:
    url = ("--server", nats_server.url)
    stream = orders
    await pcgroups.create_elastic(js, stream, "g", max_members=1)
    await pcgroups.add_members(js, stream, "g", ["only"])
    await js.publish(f"{stream}.k", b"\x00\xff binary")

    # An elastic member's consumer lives ack_wait past its last pull (orbit's
    # inactive_threshold): long enough here for the second process to start on a busy machine
    # and get the given-back message from the same consumer.
    ack_wait = ("--ack-wait", "60s")
    peek = jetstore(
        "cg", "elastic", "consume", stream, "g", "only", "--count", "1", "--no-ack",
        *ack_wait, *url,
    )  # fmt: skip
    assert peek.code == 0 and peek.text == f"0 {stream}.k: <9 bytes>\n", peek.err
    taken = jetstore(
        "cg", "elastic", "consume", stream, "g", "only", "--count", "1", "--json",
        "--confirm-acks", *ack_wait, *url,
    )  # fmt: skip
    message = json.loads(taken.out)
    assert message["delivered"] == 2 and message["data"] is None  # given back, not lost
    assert message["data_base64"] == "AP8gYmluYXJ5"
    # the server applied the ack before the process ended: the work queue is empty at once
    assert (await js.stream_info(f"{stream}-g")).state.messages == 0

    waiting = Running("cg", "elastic", "consume", stream, "g", "late", *url)
    try:
        assert waiting.process.stderr is not None
        note = waiting.process.stderr.readline().decode()
        assert note == "jetstore: late owns no partition (yet): waiting\n"
        await pcgroups.delete_elastic(js, stream, "g")
        code, _, err = waiting.end()
    finally:
        waiting.kill()
    assert code == 1 and err.strip().endswith("was deleted")
    assert "GroupDeletedError" in err


async def test_watch_group_create_watch_delete(
    js: jetstream.JetStream, nats_server: jetstream.EmbeddedServer, make_bucket: BucketFactory
) -> None:
    url = ("--server", nats_server.url)
    bucket = await make_bucket(history=5)
    await bucket.put("user.1", b"ada")
    await bucket.put("user.2", b"grace")
    created = jetstore("cg", "watch-group", "create", bucket.name, "idx", "2", "w1", "--json", *url)
    assert created.code == 0, created.err
    fields = json.loads(created.out)
    assert fields["stream"] == f"KV_{bucket.name}" and fields["partitions"] == {"w1": [0, 1]}
    assert (await pcgroups.elastic_config(js, bucket.stream, "idx")).members == ("w1",)

    await bucket.delete("user.1")
    watched = jetstore("cg", "watch", bucket.name, "idx", "w1", "--count", "3", "--json", *url)
    assert watched.code == 0, watched.err
    changes = [json.loads(line) for line in watched.text.splitlines()]
    by_key = sorted((c["key"], c["revision"], c["op"]) for c in changes)
    assert by_key == [("user.1", 1, "PUT"), ("user.1", 3, "DEL"), ("user.2", 2, "PUT")]
    assert all(c["partition"] in (0, 1) for c in changes)

    await bucket.put("user.3", b"linus")
    plain = jetstore("cg", "watch", bucket.name, "idx", "w1", "--count", "1", *url)
    assert plain.code == 0 and "PUT     user.3 rev=4: linus" in plain.text

    no_bucket, deleted = jetstore_all(
        ("cg", "watch-group", "create", "no_such_bucket", "idx", "2", *url),
        ("cg", "watch-group", "delete", bucket.name, "idx", "-f", *url),
    )
    assert no_bucket.code == 1 and "BucketNotFoundError" in no_bucket.err
    assert deleted.code == 0 and deleted.text == "deleted watch group idx\n"
    assert [g async for g in pcgroups.list_elastic(js, bucket.stream)] == []
    assert (await bucket.get("user.2")).value == b"grace"  # the bucket stays
    assert isinstance(bucket, kvstore.Bucket)


@pytest.mark.parametrize(
    ("verb", "fault", "ending"),
    [("consume", "stop", signal.SIGINT), ("watch", "pause", signal.SIGTERM)],
)
async def test_consume_and_watch_end_promptly_once_the_server_is_gone(
    verb: str, fault: str, ending: signal.Signals
) -> None:
    """Ctrl-C (or SIGTERM) after the server stopped or froze: the member leaves within its
    bound (twice --timeout), the connection closes (--timeout), exit 0, no traceback."""
    timeout = 1.0
    with jetstream.EmbeddedServer() as server:
        async with await jetstream.connect(server.url) as js:
            bucket = await create_groups(js)
        args = ("cg", "static", "consume", "S", "g", "m1")
        if verb == "watch":
            args = ("cg", "watch", bucket.name, "g", "m1")
        member = Running(*args, "--server", server.url, "--timeout", str(timeout))
        try:
            assert member.line()  # consuming
            getattr(server, fault)()
            member.process.send_signal(ending)
            started = time.monotonic()
            code, _, err = member.end()
            took = time.monotonic() - started
        finally:
            member.kill()
            server.resume()
    assert code == 0 and "Traceback" not in err, err
    assert took < 3 * timeout + 3.0, f"ended {took:.1f}s after the signal"


async def test_status_lists_stranded_partitions(
    js: jetstream.JetStream, nats_server: jetstream.EmbeddedServer, orders: str
) -> None:
    """A member name orbit's tool can store but no consumer can have owns partitions 2-3:
    ``status`` lists them as stranded, with what waits there."""
    url = ("--server", nats_server.url)
    await pcgroups.create_elastic(js, orders, "g", max_members=4)
    config = pcgroups.wire.encode_elastic_config(
        pcgroups.ElasticConfig(max_members=4, members=("a", "b c"))
    )
    await (await kvstore.open_bucket(js, pcgroups.wire.ELASTIC_BUCKET)).put(f"{orders}.g", config)
    for i in range(20):
        await js.publish(f"{orders}.k{i}", b"x")
    queue_name = pcgroups.wire.elastic_stream_name(orders, "g")
    while (await js.stream_info(queue_name)).state.messages < 20:
        await asyncio.sleep(0.02)
    plain, as_json = jetstore_all(
        ("cg", "elastic", "status", orders, "g", *url),
        ("cg", "elastic", "status", orders, "g", "--json", *url),
    )
    assert plain.code == 0, plain.err
    lines = plain.text.splitlines()
    assert lines[2].startswith("partition 2: b c, not consuming, ")
    assert lines[4].startswith("stranded: 0, 1, 2, 3 (20 waiting)")
    assert lines[5:] == ["unselected: 0", "unjoinable: b c"]
    fields = json.loads(as_json.out)
    assert fields["stranded"] == [0, 1, 2, 3] and fields["unjoinable"] == ["b c"]
    assert sum(p["waiting"] for p in fields["partitions"]) == 20
    assert [(p["partition"], p["member"], p["consuming"]) for p in fields["partitions"]] == [
        (0, "a", False),
        (1, "a", False),
        (2, "b c", False),
        (3, "b c", False),
    ]
