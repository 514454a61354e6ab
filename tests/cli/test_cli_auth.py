"""The CLI's authentication options against real servers: ``--token``, ``--tlsca``,
``--tlscert``/``--tlskey``, ``--nkey`` and ``--creds`` reach the server; refused credentials
exit 3 with one line on stderr that never shows the secret. (``--user``/``--password`` are
in test_cli_server.)"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import jetstream
from tests.security.jwts import make_operator
from tests.security.pki import Pki, make_pki

from .cli_helpers import Run, cli_env, jetstore, jetstore_all

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _server(tmp: Path, config: str) -> jetstream.EmbeddedServer:
    path = tmp / "server.conf"
    path.write_text(config)
    return jetstream.EmbeddedServer(store_dir=tmp / "store", extra_args=["-c", str(path)])


def _refused(run: Run, *secrets: str) -> None:
    """Exit 3, one line naming the error class, no secret anywhere in the output."""
    assert run.code == 3, (run.code, run.err)
    lines = run.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jetstore: error: "), run.err
    for secret in secrets:
        assert secret not in run.err and secret not in run.text


def _ok(run: Run) -> None:
    assert run.code == 0 and run.err == "", run.err  # nothing on stderr (no asyncio TLS noise)
    assert run.text == "[]\n"  # `kv ls --json` on an empty account: JetStream answered


@pytest.fixture
def token_server(tmp_path: Path) -> Iterator[jetstream.EmbeddedServer]:
    with _server(tmp_path, 'authorization { token: "t0ken-s3cret" }\n') as server:
        yield server


def test_token(token_server: jetstream.EmbeddedServer) -> None:
    url = ("--server", token_server.url)
    ok, wrong, missing = jetstore_all(
        ("kv", "ls", "--json", "--token", "t0ken-s3cret", *url),
        ("kv", "ls", "--json", "--token", "wrong-t0ken", *url),
        ("kv", "ls", "--json", *url),
    )
    _ok(ok)
    _refused(wrong, "wrong-t0ken", "t0ken-s3cret")
    assert "AuthenticationError" in wrong.err
    _refused(missing, "t0ken-s3cret")
    from_env = jetstore("kv", "ls", "--json", *url, env=cli_env(NATS_TOKEN="t0ken-s3cret"))
    _ok(from_env)


def test_tls_server_verified_with_tlsca(tmp_path: Path, pki: Pki) -> None:
    config = f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}" }}\n'
    with _server(tmp_path, config) as server:
        url = ("--server", f"tls://127.0.0.1:{server.port}")
        ok, untrusted, key_alone = jetstore_all(
            ("kv", "ls", "--json", "--tlsca", str(pki.ca), *url),
            ("kv", "ls", "--json", "--timeout", "1", *url),  # the system store lacks our CA
            ("kv", "ls", "--json", "--tlskey", str(pki.client_key), *url),
        )
    _ok(ok)
    _refused(untrusted)
    assert "ConnectionFailedError" in untrusted.err and "TLS handshake failed" in untrusted.err
    # jetstream.connect bounds a failed first connect to 2 x timeout + 1 s (nats-py hangs
    # after a refused handshake until then, forever): with --timeout 1, 3 s plus the process
    # start. The bound is loose (a loaded 2-core machine takes 8 s); a hang would take 60.
    assert untrusted.seconds < 30
    assert key_alone.code == 2 and "--tlskey needs --tlscert" in key_alone.err


def test_mutual_tls_client_certificate(tmp_path: Path, pki: Pki) -> None:
    config = (
        f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}", '
        f'ca_file: "{pki.ca}", verify: true }}\n'
    )
    ca = ("--tlsca", str(pki.ca))
    with _server(tmp_path, config) as server:
        url = ("--server", f"tls://127.0.0.1:{server.port}")
        ok, no_cert, rogue = jetstore_all(
            ("kv", "ls", "--json", *ca, "--tlscert", str(pki.client_cert),
             "--tlskey", str(pki.client_key), *url),
            ("kv", "ls", "--json", *ca, *url),
            ("kv", "ls", "--json", *ca, "--tlscert", str(pki.rogue_client_cert),
             "--tlskey", str(pki.rogue_client_key), *url),
        )  # fmt: skip
    _ok(ok)
    _refused(no_cert)
    _refused(rogue)


def test_nkey_seed_file(tmp_path: Path) -> None:
    nkeys = pytest.importorskip("nkeys")
    seeds = [nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER) for _ in range(2)]
    files = []
    for n, seed in enumerate(seeds):
        files.append(tmp_path / f"user{n}.nk")
        files[-1].write_bytes(seed)
    public = nkeys.from_seed(seeds[0]).public_key.decode()
    with _server(tmp_path, f'authorization {{ users = [ {{ nkey: "{public}" }} ] }}\n') as server:
        url = ("--server", server.url)
        ok, other = jetstore_all(
            ("kv", "ls", "--json", "--nkey", str(files[0]), *url),
            ("kv", "ls", "--json", "--nkey", str(files[1]), *url),
        )
    _ok(ok)
    _refused(other, seeds[0].decode(), seeds[1].decode())
    assert "AuthenticationError" in other.err


def test_creds_file(tmp_path: Path) -> None:
    pytest.importorskip("nkeys")
    operator = make_operator()
    good = operator.user_creds(tmp_path / "app.creds", "app")
    expired = operator.user_creds(tmp_path / "old.creds", "old", expires_in=-60)
    secrets = [
        line
        for path in (good, expired)
        for line in path.read_text().splitlines()
        if line and not line.startswith("--")
    ]  # the JWTs and the seeds
    with _server(tmp_path, operator.server_config()) as server:
        url = ("--server", server.url)
        ok, old, none = jetstore_all(
            ("kv", "ls", "--json", "--creds", str(good), *url),
            ("kv", "ls", "--json", "--creds", str(expired), *url),
            ("kv", "ls", "--json", *url),
        )
    _ok(ok)
    _refused(old, *secrets)
    _refused(none, *secrets)
    missing = jetstore("kv", "ls", "--creds", str(tmp_path / "nope.creds"), *url)
    assert missing.code == 2 and "nope.creds" in missing.err  # checked before connecting
