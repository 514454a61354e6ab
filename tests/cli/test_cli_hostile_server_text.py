"""Text another client stored (keys, object and bucket names, descriptions, metadata, subjects,
stream names) never drives the terminal or forges output: plain output shows it escaped, one
line per item; JSON stays valid and exact; an object name that cannot be a local file name is
refused (nothing written); a stream named like a bucket or store that is none is skipped with
a warning, the listing exits 0."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pexpect
import pytest

import jetstream
import kvstore
import objstore
from objstore._models import meta_subject
from tests.pcgroups.group_streams import group_stream

from .cli_helpers import ROOT, Run, cli_command, cli_env, jetstore, jetstore_all

pytestmark = pytest.mark.integration

# Set the window title, clear the screen, reverse the text (bidi), an 8-bit CSI, DEL.
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\u202e\x9b1m\x7f"
# What the same shows as, escaped.
ESCAPED = "\\x1b]0;pwned\\x07\\x1b[2J\\u202e\\x9b1m\\x7f"
# In a subject (a key, a message's subject) all of it but DEL: consumers never see a subject
# holding DEL (the server's matching, or nats-py's parser, drops it).
IN_SUBJECT, IN_SUBJECT_ESCAPED = HOSTILE[:-1], ESCAPED[: -len("\\x7f")]
# A line of `obj ls`, forged.
FORGED_ROW = "\nforged\t0\t2026-01-01T00:00:00Z\tSHA-256=x"


@pytest.fixture(scope="module")
def server() -> Iterator[jetstream.EmbeddedServer]:
    """A server of this module's own: its hostile streams stay out of other tests' listings."""
    with jetstream.EmbeddedServer() as own:
        yield own


@pytest.fixture
async def js(server: jetstream.EmbeddedServer) -> AsyncIterator[jetstream.JetStream]:
    async with await jetstream.connect(server.url) as context:
        yield context
        async for name in context.stream_names():  # raw: the library refuses hostile names
            await context.nc.request(f"$JS.API.STREAM.DELETE.{name}", b"")


def _safe(run: Run, *, tabs: bool = False) -> None:
    """Nothing on stdout or stderr can drive a terminal: every character is printable but
    the line ends (and, where they are columns, tabs)."""
    allowed = "\n\t" if tabs else "\n"
    for text in (run.text, run.err):
        bad = sorted({ch for ch in text if not ch.isprintable() and ch not in allowed})
        assert not bad, (bad, text)


def _json_safe(run: Run) -> object:
    """Valid JSON, with nothing raw in it that a terminal would act on."""
    assert all(ch.isprintable() or ch == "\n" for ch in run.text), run.text
    return json.loads(run.out)


async def test_kv_verbs_show_stored_text_escaped(
    js: jetstream.JetStream, server: jetstream.EmbeddedServer
) -> None:
    bucket = await kvstore.create_bucket(
        js, "hostile", history=5, description=HOSTILE, metadata={"m" + HOSTILE: HOSTILE}
    )
    hostile_key, key_shown = "key" + IN_SUBJECT, "key" + IN_SUBJECT_ESCAPED
    await js.publish(f"$KV.hostile.{hostile_key}", HOSTILE.encode())
    await bucket.put("good", f"v{HOSTILE}{FORGED_ROW}".encode())
    url = ("-s", server.url)
    info, keys, keys_json, history, watch, many, ls = jetstore_all(
        ("kv", "info", "hostile", *url),
        ("kv", "keys", "hostile", *url),
        ("kv", "keys", "hostile", "--json", *url),
        ("kv", "history", "hostile", "good", *url),
        ("kv", "watch", "hostile", "--count", "2", *url),
        ("kv", "get-many", "hostile", "good", *url),
        ("kv", "ls", *url),
    )
    for run in (info, keys, history, watch, many, ls):
        assert run.code == 0, run.err
        _safe(run)
    assert f"description: {ESCAPED}\n" in info.text
    assert f"metadata: m{ESCAPED}={ESCAPED}\n" in info.text
    assert keys.text.splitlines() == [key_shown, "good"]
    assert _json_safe(keys_json) == [hostile_key, "good"]
    assert len(history.text.splitlines()) == 1 and "\\nforged\\t0" in history.text
    lines = watch.text.splitlines()
    assert len(lines) == 2 and f"{key_shown} rev=" in lines[0], lines
    assert many.text == f"good v{ESCAPED}{FORGED_ROW.encode('unicode_escape').decode()}\n"
    assert ls.text == "hostile\n"


async def test_kv_get_on_a_terminal_escapes_controls_and_keeps_lines(
    js: jetstream.JetStream, server: jetstream.EmbeddedServer
) -> None:
    """Piped, `kv get` writes the value's bytes as they are; on a terminal, nothing in them
    drives it (a multi-line value still reads as lines; bytes that are not UTF-8 as \\xNN)."""
    bucket = await kvstore.create_bucket(js, "values")
    value = f"line1 {HOSTILE}\nline2\tend".encode() + b"\xff"
    await bucket.put("k", value)
    piped = jetstore("kv", "get", "values", "k", "-s", server.url)
    assert piped.code == 0 and piped.out == value
    command = cli_command("kv", "get", "values", "k", "-s", server.url)
    child = pexpect.spawn(command[0], command[1:], env=cli_env(TERM="xterm"), cwd=str(ROOT))
    try:
        child.expect(pexpect.EOF, timeout=60)
    finally:
        child.close()
    screen = child.before.decode(errors="replace")
    assert child.exitstatus == 0, screen
    assert screen == f"line1 {ESCAPED}\r\nline2\tend\\xff\r\n"


async def test_obj_verbs_show_stored_text_escaped(
    js: jetstream.JetStream, server: jetstream.EmbeddedServer
) -> None:
    store = await objstore.create_store(js, "files", description=HOSTILE)
    evil = "evil" + HOSTILE + FORGED_ROW
    await store.put(evil, b"x", description=HOSTILE, meta={"m": HOSTILE})
    await store.put("good.txt", b"y")
    await store.add_link("link" + HOSTILE, evil)
    # nats.js link(): a record without a time, listed with "-" for it
    js_link = {"name": "js-link", "bucket": "files", "options": {"link": {"bucket": "files"}}}
    await js.publish(meta_subject("files", "js-link"), json.dumps(js_link).encode())
    url = ("-s", server.url)
    ls, ls_json, store_info, object_info, watch = jetstore_all(
        ("obj", "ls", "files", *url),
        ("obj", "ls", "files", "--json", *url),
        ("obj", "info", "files", *url),
        ("obj", "info", "files", evil, *url),
        ("obj", "watch", "files", "--count", "3", *url),
    )
    for run in (ls, store_info, object_info, watch):
        assert run.code == 0, run.err
    _safe(ls, tabs=True)
    for run in (store_info, object_info, watch):
        _safe(run)
    rows = ls.text.splitlines()
    forged_escaped = "\\nforged\\t0\\t2026-01-01T00:00:00Z\\tSHA-256=x"
    assert len(rows) == 4 and sorted(row.count("\t") for row in rows) == [3, 3, 4, 4], rows
    assert "js-link\t0\t-\t\t-> files/" in rows, rows
    assert any(row.startswith(f"evil{ESCAPED}{forged_escaped}\t") for row in rows), rows
    assert any(row.endswith(f"-> files/evil{ESCAPED}{forged_escaped}") for row in rows), rows
    assert sorted(o["name"] for o in _json_safe(ls_json)) == sorted(  # type: ignore[attr-defined]
        [evil, "good.txt", "js-link", "link" + HOSTILE]
    )
    assert f"description: {ESCAPED}\n" in store_info.text
    assert f"description: {ESCAPED}\n" in object_info.text
    assert f"metadata: m={ESCAPED}\n" in object_info.text
    assert len(watch.text.splitlines()) == 3


async def test_unsafe_object_names_are_never_local_file_names(
    js: jetstream.JetStream, server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """`obj get --all` wrote a file whose name held ESC and a newline; `obj get NAME` put it
    in the current directory."""
    store = await objstore.create_store(js, "names")
    unsafe = ["evil" + HOSTILE, "dir/new\nline", "tab\there", "bidi\u202etxt.exe", "nbsp\u00a0"]
    for name in unsafe:
        await store.put(name, b"x")
    await store.put("ok/good.txt", b"y")
    url = ("-s", server.url)
    out = tmp_path / "out"
    every = jetstore("obj", "get", "names", "--all", "-o", str(out), *url)
    assert every.code == 1
    _safe(every)
    assert every.err.count("PathNotAllowedError") == len(unsafe), every.err
    assert [p.relative_to(out).as_posix() for p in out.rglob("*")] == ["ok", "ok/good.txt"]
    here = tmp_path / "here"
    here.mkdir()
    for name in unsafe:
        one = jetstore("obj", "get", "names", name, *url, cwd=here)
        assert one.code == 1 and "PathNotAllowedError" in one.err and "-o FILE" in one.err
        _safe(one)
    assert os.listdir(here) == []
    given = jetstore("obj", "get", "names", unsafe[0], "-o", str(here / "chosen"), *url)
    assert given.code == 0 and (here / "chosen").read_bytes() == b"x"  # the user named it
    _safe(given)


async def test_streams_named_like_buckets_that_are_none_are_skipped_with_a_warning(
    js: jetstream.JetStream, server: jetstream.EmbeddedServer
) -> None:
    """One such stream made `kv ls --json` fail for the whole listing (exit 2)."""
    await kvstore.create_bucket(js, "real")
    await objstore.create_store(js, "real_store")
    hostile = {
        "KV_x" + HOSTILE: "$KV.hostile1.>",
        "KV_bad+name": "$KV.hostile2.>",
        "KV_notabucket": "$KV.other.>",  # a valid name, but not the bucket it names
        "OBJ_y" + HOSTILE: "$O.hostile3.M.>",
    }
    for name, subject in hostile.items():  # the library refuses such names: a raw request
        config = json.dumps({"name": name, "subjects": [subject], "storage": "memory"})
        reply = await js.nc.request(f"$JS.API.STREAM.CREATE.{name}", config.encode())
        assert b'"error"' not in reply.data, reply.data
    url = ("-s", server.url)
    kv_ls, kv_json, obj_ls, obj_json = jetstore_all(
        ("kv", "ls", *url), ("kv", "ls", "--json", *url),
        ("obj", "ls", *url), ("obj", "ls", "--json", *url),
    )  # fmt: skip
    for run in (kv_ls, kv_json, obj_ls, obj_json):
        assert run.code == 0, run.err
        _safe(run)
        assert all(line.startswith("jetstore: warning: ") for line in run.err.splitlines())
    assert kv_ls.text == "notabucket\nreal\n"
    assert len(kv_ls.err.splitlines()) == 2 and "KV_x\\x1b]0;pwned" in kv_ls.err
    assert [bucket["bucket"] for bucket in _json_safe(kv_json)] == ["real"]  # type: ignore[attr-defined]
    assert len(kv_json.err.splitlines()) == 3 and "notabucket" in kv_json.err
    assert obj_ls.text == "real_store\n" and _json_safe(obj_json) == ["real_store"]
    assert len(obj_ls.err.splitlines()) == 1 and "OBJ_y\\x1b]0;pwned" in obj_ls.err


async def test_group_listings_and_subjects_never_show_stored_text_raw(
    js: jetstream.JetStream, server: jetstream.EmbeddedServer
) -> None:
    url = ("-s", server.url)
    async with group_stream(js, "ORDERS", partitions=1):
        created = jetstore("cg", "static", "create", "ORDERS", "g", "1", "m1", *url)
        assert created.code == 0, created.err
        await js.publish(f"ORDERS.{IN_SUBJECT}", f"data{HOSTILE}".encode())
        consumed = jetstore("cg", "static", "consume", "ORDERS", "g", "m1", "--count", "1", *url)
        await js.publish(f"$KV.static-consumer-groups.ORDERS.peer{IN_SUBJECT}", b"{}")
        ls = jetstore("cg", "static", "ls", "ORDERS", *url)
    for run in (ls, consumed):
        assert run.code == 0, run.err
        _safe(run)
    assert ls.text == "g\n"  # a group name no verb would take: skipped, with a warning
    assert ls.err.startswith("jetstore: warning: ") and f"peer{IN_SUBJECT_ESCAPED}" in ls.err
    assert consumed.text == f"0 ORDERS.{IN_SUBJECT_ESCAPED}: data{ESCAPED}\n"


async def test_progress_bars_and_result_lines_show_names_as_they_are(
    js: jetstream.JetStream, server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """On a terminal rich draws the bars and prints the result lines: a name is neither
    markup nor emoji codes (":warning:" became a sign), nor escape sequences."""
    store = await objstore.create_store(js, "bars")
    name = ":warning: [bold]x[/bold]" + HOSTILE
    await store.put(name, b"x" * 100_000)
    command = cli_command("obj", "get", "bars", name, "-o", str(tmp_path / "f"), "-s", server.url)
    env = cli_env(TERM="xterm-256color", COLUMNS="200", LINES="30")
    child = pexpect.spawn(command[0], command[1:], env=env, cwd=str(ROOT), dimensions=(30, 200))
    try:
        child.expect(pexpect.EOF, timeout=60)
    finally:
        child.close()
    screen = child.before.decode(errors="replace")
    assert child.exitstatus == 0, screen
    assert f"saved :warning: [bold]x[/bold]{ESCAPED} -> " in screen
    assert "\u26a0" not in screen and "\x1b]" not in screen and "\x07" not in screen
    assert "\u202e" not in screen and "\x9b" not in screen
    assert (tmp_path / "f").read_bytes() == b"x" * 100_000
