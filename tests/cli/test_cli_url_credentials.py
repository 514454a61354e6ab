"""Credentials in ``--server`` URLs: a password holding ``,`` ``@`` ``:`` ``%`` ``/`` is never
shown, in part or whole, whatever happens (refused, unreachable, unparseable), and reaches the
server whole where a URL can carry it."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

import jetstream

from .cli_helpers import Run, jetstore_all

pytestmark = pytest.mark.integration

# A URL carries these as written (nats-py sends the user info without %-decoding it).
IN_URL = {
    "ucomma": "hunter2,restx",
    "uatsign": "pxss@wxrd@zz9",
    "ucolon": "pxss:wxrd:zz9",
    "upercent": "pcts%2Coffs",
}
# nats-py's URL parser would cut this one: given with --password instead.
SLASH = "pxss/wxrd"


@pytest.fixture(scope="module")
def password_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[jetstream.EmbeddedServer]:
    tmp = tmp_path_factory.mktemp("url-credentials")
    users = [*IN_URL.items(), ("uslash", SLASH)]
    entries = ", ".join(f'{{ user: "{user}", password: "{pw}" }}' for user, pw in users)
    config = Path(tmp / "server.conf")
    config.write_text(f"authorization {{ users = [ {entries} ] }}\n")
    with jetstream.EmbeddedServer(store_dir=tmp / "store", extra_args=["-c", str(config)]) as s:
        yield s


def _closed_port() -> int:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        return int(closed.getsockname()[1])  # nothing listens once closed


def _fragments(password: str) -> list[str]:
    """The pieces a split at any of the special characters would leave."""
    return [part for part in re.split(r"[,@:%/]", password) if len(part) >= 3]


def _hidden(run: Run, user: str, password: str) -> None:
    for secret in [user, *_fragments(password)]:
        assert secret not in run.err and secret not in run.text, (secret, run.err)


def test_passwords_in_urls_reach_the_server_whole(
    password_server: jetstream.EmbeddedServer,
) -> None:
    port = password_server.port
    runs = jetstore_all(
        *(
            ("kv", "ls", "--json", "-s", f"nats://{user}:{pw}@127.0.0.1:{port}")
            for user, pw in IN_URL.items()
        ),
        ("kv", "ls", "--json", "-s", f"nats://127.0.0.1:{port}", "--user", "uslash",
         "--password", SLASH),
    )  # fmt: skip
    for run in runs:
        assert (run.code, run.text, run.err) == (0, "[]\n", "")


def test_refused_and_unreachable_never_show_the_password(
    password_server: jetstream.EmbeddedServer,
) -> None:
    port = password_server.port
    dead, other = _closed_port(), _closed_port()
    calls = []
    for user, pw in IN_URL.items():
        wrong = pw + "x"
        calls.append(("kv", "ls", "-s", f"nats://{user}:{wrong}@127.0.0.1:{port}"))
        calls.append(
            ("kv", "ls", "-s", f"nats://{user}:{pw}@127.0.0.1:{dead},nats://127.0.0.1:{other}")
        )
    runs = jetstore_all(*calls)
    for (user, pw), refused, unreachable in zip(IN_URL.items(), runs[::2], runs[1::2], strict=True):
        assert refused.code == 3 and "AuthenticationError" in refused.err, refused.err
        assert unreachable.code == 3 and "ConnectionFailedError" in unreachable.err
        assert f"127.0.0.1:{dead}" in unreachable.err, "names the server, without user info"
        _hidden(refused, user, pw + "x")
        _hidden(unreachable, user, pw)


def test_the_reported_password_never_shows() -> None:
    """Issue 29: `cannot connect to nats://alice:hunter2, host:4222` (split, then redacted)."""
    dead = _closed_port()
    (run,) = jetstore_all(("kv", "ls", "-s", f"nats://alice:hunter2,rest@127.0.0.1:{dead}"))
    assert run.code == 3
    assert run.err.startswith(
        f"jetstore: error: ConnectionFailedError: cannot connect to nats://127.0.0.1:{dead}: "
        "connection refused"
    )
    _hidden(run, "alice", "hunter2,rest")


def test_a_url_that_would_cut_its_password_is_a_usage_error(
    password_server: jetstream.EmbeddedServer,
) -> None:
    url = f"nats://uslash:{SLASH}@127.0.0.1:{password_server.port}"
    (run,) = jetstore_all(("kv", "ls", "-s", url))
    assert run.code == 2, run.err  # nothing sent
    assert run.err.startswith("jetstore: error: ClientValidationError: servers: entry 1 of 1")
    assert "--password" in run.err
    _hidden(run, "uslash", SLASH)
