"""``jetstore kv``: every verb as a subprocess against a real server, checking its output,
what it stored (read back through the library) and its exit code."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pexpect
import pytest

import jetstream
import kvstore
from tests.conftest import BucketFactory

from .cli_helpers import ROOT, cli_command, cli_env, jetstore, jetstore_all

pytestmark = pytest.mark.integration


async def test_bucket_verbs_add_info_ls_rm(
    js: jetstream.JetStream,
    nats_server: jetstream.EmbeddedServer,
    unique_name: Callable[[str], str],
) -> None:
    name = unique_name("kv")
    url = ("--server", nats_server.url)
    added = jetstore(
        "kv",
        "add",
        name,
        "--history",
        "5",
        "--marker-ttl",
        "2s",
        "--max-value-size",
        "1KiB",
        "--max-bytes",
        "10M",
        "--description",
        "profiles",
        "--metadata",
        "team=data",
        "--json",
        *url,
    )
    assert added.code == 0, added.err
    fields = json.loads(added.out)
    assert fields == {
        "bucket": name,
        "values": 0,
        "bytes": 0,
        "history": 5,
        "max_age": None,
        "marker_ttl": 2,
        "max_value_size": 1024,
        "max_bytes": 10 * 1024 * 1024,
        "storage": "file",
        "replicas": 1,
        "compression": False,
        "description": "profiles",
        "metadata": {"team": "data"},
    }
    config = (await (await kvstore.open_bucket(js, name)).status()).config
    assert config.history == 5 and config.max_value_size == 1024

    info, listed, refused = jetstore_all(
        ("kv", "info", name, *url),
        ("kv", "ls", "--json", *url),
        ("kv", "rm", name, *url),  # stdin is no terminal: --force is needed
    )
    assert info.code == 0 and f"bucket: {name}\n" in info.text and "marker_ttl: 2\n" in info.text
    assert name in [bucket["bucket"] for bucket in json.loads(listed.out)]
    assert refused.code == 2 and "--force" in refused.err
    await kvstore.open_bucket(js, name)  # still there

    assert jetstore("kv", "rm", name, "-f", *url).code == 0
    gone, names = jetstore_all(("kv", "info", name, *url), ("kv", "ls", *url))
    assert gone.code == 1
    assert gone.err.strip().startswith("jetstore: error: BucketNotFoundError")
    assert len(gone.err.strip().splitlines()) == 1  # one line, no traceback
    assert name not in names.text.split()


async def test_writes_and_reads(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    bucket = await make_bucket(history=10)
    url = ("--server", nats_server.url)
    b = bucket.name
    assert jetstore("kv", "put", b, "user.name", "Ada", *url).text == "1\n"
    binary = bytes(range(256))
    (tmp_path / "v.bin").write_bytes(binary)
    assert jetstore("kv", "put", b, "user.blob", "--file", str(tmp_path / "v.bin"), *url).code == 0
    piped = jetstore("kv", "put", b, "user.city", "--ttl", "1h", "--json", *url, stdin=b"Paris")
    assert json.loads(piped.out) == {"key": "user.city", "revision": 3}
    assert (await bucket.get("user.blob")).value == binary
    assert (await bucket.get("user.city")).ttl == 3600

    exists = jetstore("kv", "create", b, "user.name", "X", *url)
    assert exists.code == 1 and "KeyExistsError" in exists.err and "user.name" in exists.err
    assert jetstore("kv", "create", b, "user.zip", "75001", *url).text == "4\n"
    wrong = jetstore("kv", "update", b, "user.name", "Al", "--revision", "3", *url)
    assert wrong.code == 1 and "WrongRevisionError" in wrong.err and "current 1" in wrong.err
    assert jetstore("kv", "update", b, "user.name", "Al", "--revision", "1", *url).text == "5\n"

    raw, first, blob_json = jetstore_all(
        ("kv", "get", b, "user.blob", *url),
        ("kv", "get", b, "user.name", "--revision", "1", "--json", *url),
        ("kv", "get", b, "user.blob", "--json", *url),
    )
    assert raw.code == 0 and raw.out == binary  # raw bytes to stdout
    entry = json.loads(first.out)
    assert entry["value"] == "Ada" and entry["revision"] == 1 and entry["op"] == "PUT"
    assert set(entry) == {
        "bucket",
        "key",
        "revision",
        "op",
        "created",
        "ttl",
        "size",
        "value",
        "value_base64",
    }
    blob = json.loads(blob_json.out)
    assert blob["value"] is None and base64.b64decode(blob["value_base64"]) == binary

    assert jetstore("kv", "del", b, "user.zip", *url).text == "6\n"
    assert jetstore("kv", "purge", b, "user.city", *url).text == "7\n"

    history, plain, keys, missing = jetstore_all(
        ("kv", "history", b, "user.name", "--json", *url),
        ("kv", "history", b, "user.zip", *url),
        ("kv", "keys", b, "user.*", *url),
        ("kv", "get", b, "user.zip", *url),
    )
    entries = json.loads(history.out)
    assert [(e["revision"], e["value"]) for e in entries] == [(1, "Ada"), (5, "Al")]
    assert [line.split()[2] for line in plain.text.splitlines()] == ["PUT", "DEL"]
    assert keys.text.split() == ["user.blob", "user.name"]
    assert missing.code == 1 and "KeyNotFoundError" in missing.err


async def test_put_many_and_get_many(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    bucket = await make_bucket()
    url = ("--server", nats_server.url)
    b = bucket.name
    records = tmp_path / "people.jsonl"
    records.write_text(
        '{"key": "p.1.name", "value": "Ada", "revision": 0}\n'
        '{"key": "p.1.city", "value": "London", "ttl": "1h"}\n\n'
        '{"key": "p.1.bin", "value_base64": "AAEC"}\n'
    )
    stored = jetstore("kv", "put-many", b, str(records), "--batch-size", "2", *url)
    assert stored.code == 0, stored.err
    assert stored.text.splitlines() == ["p.1.name 1", "p.1.city 2", "p.1.bin 3"]
    assert (await bucket.get("p.1.city")).ttl == 3600
    assert (await bucket.get("p.1.bin")).value == b"\x00\x01\x02"

    csv_file = tmp_path / "more.csv"
    csv_file.write_text("key,value,revision\np.2.name,Grace,0\np.1.name,Ada L.,1\n")
    as_json = jetstore("kv", "put-many", b, str(csv_file), "--json", *url)
    assert json.loads(as_json.out) == {"p.2.name": 4, "p.1.name": 5}

    # A failed condition stores nothing of its batch: p.3 is not written either.
    conflict = jetstore(
        "kv",
        "put-many",
        b,
        "-",
        "--format",
        "json",
        *url,
        stdin=json.dumps(
            [{"key": "p.3", "value": "x"}, {"key": "p.2.name", "value": "y", "revision": 0}]
        ).encode(),
    )
    assert conflict.code == 1 and "p.2.name" in conflict.err
    with pytest.raises(kvstore.KeyNotFoundError):
        await bucket.get("p.3")

    snapshot, plain = jetstore_all(
        ("kv", "get-many", b, "p.1.name", "p.2.name", "p.9", "--json", *url),
        ("kv", "get-many", b, "p.2.name", "p.9", *url),
    )
    document = json.loads(snapshot.out)
    assert document["revision"] == 5 and document["missing"] == ["p.9"]
    assert [(e["key"], e["value"]) for e in document["entries"]] == [
        ("p.1.name", "Ada L."),
        ("p.2.name", "Grace"),
    ]
    assert plain.code == 0 and plain.text == "p.2.name Grace\n" and "p.9" in plain.err


async def test_watch_shows_changes_and_expiry(
    make_bucket: BucketFactory, nats_server: jetstream.EmbeddedServer
) -> None:
    bucket = await make_bucket(marker_ttl=1)
    await bucket.put("a.first", b"1")
    watch = subprocess.Popen(  # noqa: ASYNC220 (starting it is quick; reading waits)
        cli_command(
            "kv", "watch", bucket.name, "a.>", "--json", "--count", "5", "--server", nats_server.url
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    try:
        assert watch.stdout is not None
        first = json.loads(watch.stdout.readline())  # the current value: the watch is live
        assert (first["key"], first["op"], first["value"]) == ("a.first", "PUT", "1")
        # One change at a time: a purge removes the key's earlier revisions from the stream,
        # so a DEL not yet delivered when the purge lands would never be seen (as designed).
        seen = []
        for change in (
            bucket.put("a.second", b"2", ttl=2),  # read long before it expires
            bucket.delete("a.first"),
            bucket.purge("a.first"),
            bucket.put("b.other", b"not watched"),
        ):
            await change
            if len(seen) < 3:
                seen.append(json.loads(watch.stdout.readline()))
        out, err = watch.communicate(timeout=30)  # ends after --count entries
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate()
    assert watch.returncode == 0, err
    ops = [(e["key"], e["op"]) for e in [*seen, *map(json.loads, out.splitlines())]]
    assert ops == [
        ("a.second", "PUT"),
        ("a.first", "DEL"),
        ("a.first", "PURGE"),
        ("a.second", "EXPIRED"),
    ]

    history = jetstore(
        "kv", "watch", bucket.name, "--include-history", "--count", "2", "--server", nats_server.url
    )
    lines = history.text.splitlines()  # history 1: what the bucket still holds
    assert history.code == 0 and len(lines) == 2
    assert "PURGE   a.first rev=4" in lines[0] and "PUT     b.other rev=5: not watched" in lines[1]
    assert "\x1b[" not in history.text  # no colour codes when piped

    args = cli_command("kv", "watch", bucket.name, "b.>", "--count", "1", "-s", nats_server.url)
    on_tty = pexpect.spawn(args[0], args[1:], env=cli_env(TERM="xterm"), cwd=str(ROOT))
    try:
        on_tty.expect(pexpect.EOF, timeout=30)
    finally:
        on_tty.close()
    assert on_tty.exitstatus == 0
    assert "\x1b[32mPUT" in on_tty.before.decode()  # ops coloured on a terminal: PUT green


def test_bad_input_exits_2_before_sending(
    nats_server: jetstream.EmbeddedServer, tmp_path: Path, closed_port: int
) -> None:
    # Nothing listens there: a command that connected before checking its input would end
    # with exit 3 (ConnectionFailedError) instead of 2 and the input's error.
    unreachable = ("--server", f"nats://127.0.0.1:{closed_port}")
    cases = [
        (("kv", "put", "b", "bad key", "v", *unreachable), "InvalidKeyError"),
        (("kv", "put", "b", "k", "v", "--ttl", "1.5s", *unreachable), "InvalidTTLError"),
        (
            ("kv", "put", "b", "k", "--file", str(tmp_path / "missing"), *unreachable),
            "does not exist",
        ),
        (("kv", "add", "b", "--history", "65", *unreachable), "--history"),
        (("kv", "add", "b", "--max-age", "soon", *unreachable), "max_age"),
        (("kv", "update", "b", "k", "v", *unreachable), "--revision"),
        (("kv", "get", "b", "k"), "no server"),  # no --server and no NATS_URL
    ]
    for (args, message), result in zip(cases, jetstore_all(*(c[0] for c in cases)), strict=True):
        assert result.code == 2, (args, result.err)
        assert message in result.err, (args, result.err)
        assert len(result.err.strip().splitlines()) == 1, result.err

    url = ("--server", nats_server.url)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": "ok", "value": "1"}\n{"key": "no good", "value": "2"}\n')
    refused = jetstore("kv", "put-many", "b", str(bad), *url)
    assert refused.code == 2 and "no good" in refused.err

    missing, debug = jetstore_all(
        ("kv", "get", "no_such_bucket", "k", *url),
        ("kv", "get", "no_such_bucket", "k", "--debug", *url),
    )
    assert missing.code == debug.code == 1 and "Traceback" not in missing.err
    assert "Traceback" in debug.err and "BucketNotFoundError" in debug.err.splitlines()[-1]


def test_unreachable_server_exits_3_at_once(closed_port: int) -> None:
    result = jetstore("kv", "ls", "--server", f"nats://127.0.0.1:{closed_port}")
    assert result.code == 3
    assert result.err.startswith("jetstore: error: ConnectionFailedError")
    assert "connection refused" in result.err and len(result.err.strip().splitlines()) == 1
    assert result.seconds < 8  # process start included; nats-py alone would retry for minutes


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
