"""The connection and output options anywhere on the line, as natscli takes its global flags:
before the group, after it or among the verb's arguments; one value each (a second, different
one is a usage error); ``$NATS_URL`` and its siblings when the line gives none. Run in this
process (tests/cli/cli_helpers.jetstore_here)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import jetstream

from .cli_helpers import jetstore_here

pytestmark = pytest.mark.integration

DEAD = "nats://127.0.0.1:1"  # nothing listens there: a verb that connects fails, exit 3


@pytest.fixture
def bucket(
    nats_server: jetstream.EmbeddedServer, unique_name: Callable[[str], str]
) -> Iterator[str]:
    name = unique_name("kv")
    made = jetstore_here("kv", "add", name, "--server", nats_server.url)
    assert made.code == 0, made.err
    yield name
    jetstore_here("kv", "rm", name, "-f", "--server", nats_server.url)


@pytest.mark.parametrize(
    "line",
    [
        ("-s", "URL", "kv", "ls"),
        ("kv", "-s", "URL", "ls"),
        ("kv", "ls", "-s", "URL"),
        ("--server=URL", "kv", "ls"),
        ("kv", "--server", "URL", "--timeout", "10s", "ls", "--timeout", "10"),
    ],
)
def test_the_server_may_be_given_before_the_group_after_it_or_after_the_verb(
    line: tuple[str, ...], nats_server: jetstream.EmbeddedServer, bucket: str
) -> None:
    listed = jetstore_here(*(part.replace("URL", nats_server.url) for part in line))
    assert listed.code == 0, listed.err
    assert bucket in listed.text.splitlines()


def test_output_options_may_come_before_the_group(
    nats_server: jetstream.EmbeddedServer, bucket: str
) -> None:
    listed = jetstore_here("--json", "-s", nats_server.url, "kv", "ls")
    assert listed.code == 0, listed.err
    assert bucket in [fields["bucket"] for fields in json.loads(listed.out)]
    quiet = jetstore_here("-q", "kv", "--debug", "put", bucket, "k", "v", "-s", nats_server.url)
    assert (quiet.code, quiet.out) == (0, b"")  # no revision printed


def test_a_server_on_the_line_wins_over_nats_url_wherever_it_stands(
    nats_server: jetstream.EmbeddedServer, bucket: str
) -> None:
    from_line = jetstore_here("-s", nats_server.url, "kv", "ls", env={"NATS_URL": DEAD})
    assert from_line.code == 0, from_line.err
    from_environment = jetstore_here("kv", "ls", env={"NATS_URL": nats_server.url})
    assert from_environment.code == 0 and bucket in from_environment.text


@pytest.mark.parametrize(
    ("line", "option"),
    [
        (("-s", DEAD, "kv", "ls", "-s", "nats://127.0.0.1:2"), "--server"),
        (("kv", "-s", DEAD, "-s", "nats://127.0.0.1:2", "ls"), "--server"),
        (("--user", "u", "--password", "hunter2", "kv", "ls", "--password", "swordfish"),
         "--password"),
        (("--timeout", "1", "kv", "ls", "--timeout", "2"), "--timeout"),
    ],
)  # fmt: skip
def test_an_option_given_twice_with_different_values_is_a_usage_error_quoting_neither(
    line: tuple[str, ...], option: str
) -> None:
    ran = jetstore_here(*line, env={"NATS_URL": DEAD})
    assert ran.code == 2, ran.err
    assert f"{option} given twice with different values" in ran.err
    assert not {"hunter2", "swordfish", "127.0.0.1"} & set(ran.err.replace(":", " ").split())


def test_the_same_value_twice_is_one_value(nats_server: jetstream.EmbeddedServer) -> None:
    url = nats_server.url
    listed = jetstore_here("-s", url, "--json", "kv", "-s", url, "ls", "--json", "-s", url)
    assert listed.code == 0, listed.err


def test_timeout_takes_seconds_or_a_duration_as_natscli_writes_it(
    nats_server: jetstream.EmbeddedServer, bucket: str
) -> None:
    for timeout in ("5s", "1500ms", "2"):
        listed = jetstore_here("--timeout", timeout, "kv", "ls", "-s", nats_server.url)
        assert listed.code == 0, (timeout, listed.err)
    for bad in ("0", "-1s", "soon"):
        refused = jetstore_here("--timeout", bad, "kv", "ls", "-s", nats_server.url)
        assert refused.code == 2 and "--timeout" in refused.err, (bad, refused.err)


def test_a_file_variable_naming_no_file_is_a_usage_error_naming_the_variable(
    tmp_path: Path,
) -> None:
    ran = jetstore_here("kv", "ls", env={"NATS_URL": DEAD, "NATS_CREDS": str(tmp_path / "x")})
    assert ran.code == 2 and "$NATS_CREDS" in ran.err, ran.err


def test_the_server_verb_refuses_connection_options_wherever_they_stand() -> None:
    for line in (("-s", DEAD, "server"), ("server", "--user", "u")):
        ran = jetstore_here(*line)
        assert ran.code == 2 and "takes no" in ran.err, ran.err
