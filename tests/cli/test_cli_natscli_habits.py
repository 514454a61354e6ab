"""natscli's commands where they mean what ours do (``kv ls BUCKET``, ``kv get --raw``,
``kv status``, ``obj del`` ...), and a usage error naming our verb where they do not. Run in
this process (tests/cli/cli_helpers.jetstore_here)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pytest

import jetstream

from .cli_helpers import Run, jetstore_here

pytestmark = pytest.mark.integration

DEAD = "nats://127.0.0.1:1"  # a usage error comes before any connect: never reached


def test_a_natscli_users_first_commands_work(
    nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str], tmp_path: Path
) -> None:
    bucket, store = unique_name("kv"), unique_name("obj")

    def nats(*args: str, stdin: bytes = b"") -> Run:
        ran = jetstore_here("-s", nats_server.url, *args, stdin=stdin)
        assert ran.code == 0, (args, ran.err)
        return ran

    try:
        nats("kv", "add", bucket)
        assert nats("kv", "put", bucket, "greeting", "hello").text == "1\n"
        assert nats("kv", "get", bucket, "greeting", "--raw").out == b"hello"
        assert nats("kv", "ls", bucket).text == "greeting\n"
        assert f"bucket: {bucket}\n" in nats("kv", "status", bucket).text
        assert bucket in nats("kv", "ls").text.splitlines()

        nats("obj", "add", store)
        (tmp_path / "report.txt").write_bytes(b"numbers")
        nats("obj", "put", store, str(tmp_path / "report.txt"), "-f")
        nats("obj", "put", store, "--name", "piped.txt", stdin=b"from stdin")
        nats("obj", "get", store, "piped.txt", "-O", str(tmp_path / "got.txt"), "-f")
        assert (tmp_path / "got.txt").read_bytes() == b"from stdin"
        nats("obj", "del", store, "report.txt", "-f")
        listed = nats("obj", "ls", store).text
        assert "piped.txt" in listed and "report.txt" not in listed
        nats("object", "del", store, "-f")
    finally:
        jetstore_here("-s", nats_server.url, "kv", "rm", bucket, "-f")
        jetstore_here("-s", nats_server.url, "obj", "rm", store, "-f")


@pytest.fixture
def bucket(
    nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> Iterator[str]:
    """A bucket (made with natscli's `kv new`) holding user.a, user.b, team.x (revisions 1-3)."""
    name = unique_name("kv")
    for line in (
        ("kv", "new", name, "--history", "5"),
        ("kv", "put", name, "user.a", "1"),
        ("kv", "put", name, "user.b", "2"),
        ("kv", "put", name, "team.x", "3"),
    ):
        assert jetstore_here(*line, "-s", nats_server.url).code == 0, line
    yield name
    jetstore_here("kv", "rm", name, "-f", "-s", nats_server.url)


def test_kv_ls_with_a_bucket_lists_its_keys_matching_the_filter(
    nats_server: jetstream.EmbeddedServer, bucket: str
) -> None:
    url = ("-s", nats_server.url)
    listed = jetstore_here("kv", "list", bucket, "-n", *url)
    assert sorted(listed.text.split()) == ["team.x", "user.a", "user.b"]
    matching = jetstore_here("kv", "ls", bucket, "user.*", "--json", *url)
    assert json.loads(matching.out) == ["user.a", "user.b"]


def test_kv_update_takes_natscli_revision_after_the_value(
    nats_server: jetstream.EmbeddedServer, bucket: str
) -> None:
    url = ("-s", nats_server.url)
    assert jetstore_here("kv", "update", bucket, "user.a", "one", "1", *url).text == "4\n"
    stale = jetstore_here("kv", "update", bucket, "user.a", "uno", "1", *url)
    assert stale.code == 1 and "revision" in stale.err
    assert jetstore_here("kv", "get", bucket, "user.a", *url).out == b"one"


def test_kv_watch_takes_natscli_flags(nats_server: jetstream.EmbeddedServer, bucket: str) -> None:
    url = ("-s", nats_server.url)
    assert jetstore_here("kv", "del", bucket, "team.x", "-f", *url).code == 0
    assert jetstore_here("kv", "put", bucket, "user.c", "5", *url).code == 0
    history = jetstore_here("kv", "watch", bucket, "--history", "--count", "4", *url)
    assert [line.split()[3] for line in history.text.splitlines()] == [
        "user.a", "user.b", "team.x", "team.x"
    ]  # fmt: skip
    live = jetstore_here("kv", "watch", bucket, "--no-deletes", "--count", "3", *url)
    assert [line.split()[3] for line in live.text.splitlines()] == ["user.a", "user.b", "user.c"]
    from_revision = jetstore_here("kv", "watch", bucket, "--revision", "2", "--count", "1", *url)
    assert "user.b rev=2" in from_revision.text


def test_kv_compact_removes_the_history_of_deleted_keys(
    nats_server: jetstream.EmbeddedServer, bucket: str
) -> None:
    url = ("-s", nats_server.url)
    jetstore_here("kv", "purge", bucket, "team.x", "-f", *url)
    compacted = jetstore_here("kv", "compact", bucket, "-f", "--older-than", "0", "--json", *url)
    assert json.loads(compacted.out) == {"removed": 1}
    assert jetstore_here("kv", "history", bucket, "team.x", *url).code == 1


def _groups() -> list[tuple[str, Any]]:
    """Every group of the command line (a VerbGroup), by its path."""
    from jetstore._app import cli
    from jetstore._habits import VerbGroup

    found: list[tuple[str, VerbGroup]] = []

    def walk(path: str, group: VerbGroup) -> None:
        found.append((path, group))
        with click.Context(group) as ctx:
            for name in group.list_commands(ctx):
                command = group.get_command(ctx, name)
                if isinstance(command, VerbGroup):
                    walk(f"{path} {name}", command)

    assert isinstance(cli, VerbGroup)
    walk("jetstore", cli)
    return found


def test_every_group_answers_to_the_natscli_and_orbit_names_of_its_verbs() -> None:
    paths = {path for path, _ in _groups()}
    assert {"jetstore kv", "jetstore obj", "jetstore cg static", "jetstore cg elastic"} <= paths
    expected = {
        "jetstore": {"object": "obj"},
        "jetstore kv": {"new": "add", "status": "info", "view": "info", "list": "ls"},
        "jetstore obj": {"del": "rm", "show": "info", "i": "info"},
        "jetstore cg static": {"list": "ls", "rm": "delete", "sd": "step-down", "join": "consume"},
        "jetstore cg elastic": {"cm": "mappings set", "delete-mapping": "mappings delete"},
    }
    for path, group in _groups():
        with click.Context(group) as ctx:
            for alias, target in expected.get(path, {}).items():
                reached: click.Command | None = group
                for part in target.split():
                    assert isinstance(reached, click.Group)
                    reached = reached.get_command(ctx, part)
                assert group.get_command(ctx, alias) is reached is not None, (path, alias)
            for alias in group.aliases:  # and no alias hides a verb of ours
                assert alias not in group.list_commands(ctx), (path, alias)


@pytest.mark.parametrize(
    ("line", "ours"),
    [
        (("kv", "del", "B"), "`jetstore kv rm BUCKET`"),
        (("kv", "rm", "B", "k"), "`jetstore kv del BUCKET KEY`"),
        (("kv", "status"), "`jetstore kv ls`"),
        (("obj", "info"), "`jetstore obj ls`"),
        (("obj", "put", "S"), "- (stdin) with --name"),
        (("kv", "revert", "B", "k", "2"), "`jetstore kv get BUCKET KEY --revision N | jetstore kv"),
        (("kv", "edit", "B"), "kvstore.update_bucket"),
        (("obj", "edit", "S"), "objstore.update_store"),
        (("kv", "--raw", "get", "B", "k"), "option of `jetstore kv get`: give it after the verb"),
        (("--revision", "3", "kv", "get", "B", "k"), "`jetstore kv get`"),
        (("kv", "ls", "B", "-v"), "`jetstore kv get BUCKET KEY --json`"),
        (("obj", "put", "S", "-", "--name", "x", "--no-progress"), "--quiet"),
        (("--context", "prod", "kv", "ls"), "--server"),
        (("--jwt", "x.jwt", "kv", "ls"), "--creds FILE"),
        (("--socks-proxy", "p", "kv", "ls"), "does not support this natscli option"),
        (("kv", "add", "B", "--tags", "ssd"), "placement, republishing, mirrors and sources"),
        (("obj", "put", "S", "-", "--name", "x", "-H", "a:b"), "--meta NAME=VALUE"),
        (("kv", "update", "B", "k", "v", "3", "--revision", "3"), "--revision N"),
        (("kv", "update", "B", "k", "v"), "--revision N"),
        (("kv", "watch", "B", "--updates", "--revision", "2"), "--revision and --updates-only"),
        (("cg", "static", "member-info", "S", "G", "m"), "`jetstore cg static info STREAM GROUP`"),
        (("cg", "elastic", "prompt"), "`jetstore cg elastic --help`"),
        (("cg", "static", "--sleep", "1s", "ls", "S"), "`jetstore cg KIND consume`"),
        (("kv", "frobnicate"), "jetstore kv has add, compact,"),
        (("stream", "ls"), "jetstore has cg, kv, obj, server"),
    ],
)  # fmt: skip
def test_a_natscli_habit_we_do_not_take_is_a_usage_error_naming_ours(
    line: tuple[str, ...], ours: str
) -> None:
    ran = jetstore_here(*line, "-s", DEAD)
    assert ran.code == 2, ran.err
    assert ran.err.startswith("jetstore: usage: ") and len(ran.err.splitlines()) == 1, ran.err
    assert ours in ran.err
    assert "No such option" not in ran.err and "unexpected extra argument" not in ran.err
