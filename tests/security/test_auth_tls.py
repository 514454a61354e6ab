"""TLS, mutual TLS, tokens, passwords and nkeys pass through to nats-py; failures are typed and
secrets never show in reprs or error messages."""

from __future__ import annotations

import gc
import logging
import os
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

import jetstream
import kvstore
from jetstream._options import ConnectionOptions
from tests.security.jwts import make_operator
from tests.security.pki import Pki, make_pki


@pytest.fixture(autouse=True)
def _collect() -> Iterator[None]:
    """A refused connection must leave no socket behind (connect() closes it): collect now, so
    a leak shows as a ResourceWarning (an error) in the test that made it."""
    yield
    gc.collect()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _server(tmp: Path, config: str) -> jetstream.EmbeddedServer:
    path = tmp / "server.conf"
    path.write_text(config)
    return jetstream.EmbeddedServer(store_dir=tmp / "store", extra_args=["-c", str(path)])


def _context(pki: Pki, *, client: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca))  # hostname checks stay on
    if client is not None:
        context.load_cert_chain(str(client[0]), str(client[1]))
    return context


async def _round_trip(js: jetstream.JetStream, name: str) -> None:
    bucket = await kvstore.create_bucket(js, name)
    await bucket.put("k", b"v")
    assert (await bucket.get("k")).value == b"v"


@pytest.fixture
def tls_server(pki: Pki, tmp_path: Path) -> Iterator[jetstream.EmbeddedServer]:
    config = f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}" }}\n'
    with _server(tmp_path, config) as server:
        yield server


@pytest.fixture
def mtls_server(pki: Pki, tmp_path: Path) -> Iterator[jetstream.EmbeddedServer]:
    config = (
        f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}", '
        f'ca_file: "{pki.ca}", verify: true }}\n'
    )
    with _server(tmp_path, config) as server:
        yield server


async def test_tls(tls_server: jetstream.EmbeddedServer, pki: Pki) -> None:
    url = f"tls://127.0.0.1:{tls_server.port}"
    async with await jetstream.connect(url, tls=_context(pki)) as js:
        await _round_trip(js, "tls")
    with pytest.raises(jetstream.ConnectionFailedError):  # the system trust store lacks our CA
        await jetstream.connect(
            url, tls=ssl.create_default_context(), max_reconnect_attempts=0, allow_reconnect=False
        )


async def test_mutual_tls(mtls_server: jetstream.EmbeddedServer, pki: Pki) -> None:
    url = f"tls://127.0.0.1:{mtls_server.port}"
    client = (pki.client_cert, pki.client_key)
    async with await jetstream.connect(url, tls=_context(pki, client=client)) as js:
        await _round_trip(js, "mtls")
    for certificate in (None, (pki.rogue_client_cert, pki.rogue_client_key)):
        with pytest.raises(jetstream.ConnectionFailedError):
            await jetstream.connect(
                url,
                tls=_context(pki, client=certificate),
                allow_reconnect=False,
                max_reconnect_attempts=0,
            )


async def test_token_and_password(tmp_path: Path) -> None:
    with _server(tmp_path, 'authorization { token: "t0ken-s3cret" }\n') as server:
        url = f"nats://127.0.0.1:{server.port}"
        async with await jetstream.connect(url, token="t0ken-s3cret") as js:
            await _round_trip(js, "token")
        with pytest.raises(jetstream.AuthenticationError) as wrong:
            await jetstream.connect(
                url, token="wrong-t0ken", allow_reconnect=False, max_reconnect_attempts=0
            )
        assert "wrong-t0ken" not in str(wrong.value)
        # With reconnects on, nats-py only says "no servers"; the refusal is still reported.
        with pytest.raises(jetstream.AuthenticationError):
            await jetstream.connect(
                url, token="wrong-t0ken", max_reconnect_attempts=1, reconnect_time_wait=0.05
            )


async def test_password_stays_out_of_reprs_errors_and_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, every level
    config = 'authorization { users = [ { user: "app", password: "pa55-w0rd-x" } ] }\n'
    with _server(tmp_path, config) as server:
        url = f"nats://app:pa55-w0rd-x@127.0.0.1:{server.port}"
        async with await jetstream.connect(url) as js:
            await _round_trip(js, "password")
            assert "pa55-w0rd-x" not in repr(js)
            bucket = await kvstore.open_bucket(js, "password")
            assert "pa55-w0rd-x" not in repr(bucket)
        with pytest.raises(jetstream.AuthenticationError) as wrong:
            await jetstream.connect(
                f"nats://app:bad-pa55@127.0.0.1:{server.port}",
                allow_reconnect=False,
                max_reconnect_attempts=0,
            )
        assert "bad-pa55" not in str(wrong.value) and "app:" not in str(wrong.value)
        assert f"127.0.0.1:{server.port}" in str(wrong.value), "says which server refused"
        with pytest.raises(jetstream.AuthenticationError):
            await jetstream.connect(
                f"nats://app:bad-pa55@127.0.0.1:{server.port}",
                max_reconnect_attempts=2,
                reconnect_time_wait=0.05,
            )
    assert "pa55-w0rd-x" not in caplog.text and "bad-pa55" not in caplog.text
    options = ConnectionOptions.from_strings(
        {
            "servers": "nats://127.0.0.1:4222",
            "user": "app",
            "password": "pa55-w0rd-x",
            "token": "tok-123",
        }
    )
    assert "pa55-w0rd-x" not in repr(options) and "tok-123" not in repr(options)


async def test_nkey_users(tmp_path: Path) -> None:
    nkeys = pytest.importorskip("nkeys")
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(seed).public_key.decode()
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(seed)
    with _server(tmp_path, f'authorization {{ users = [ {{ nkey: "{public}" }} ] }}\n') as server:
        url = f"nats://127.0.0.1:{server.port}"
        async with await jetstream.connect(url, nkeys_seed=str(seed_file)) as js:
            await _round_trip(js, "nkey")
        options = ConnectionOptions.from_strings({"servers": url, "nkeySeedFile": str(seed_file)})
        async with await options.connect() as js:
            assert (await js.account_info()).api.level >= 1


async def test_user_credentials_from_a_creds_file(tmp_path: Path) -> None:
    """Decentralized auth: an operator-signed account and user JWTs, as ``nsc`` would make."""
    operator = make_operator()
    good = operator.user_creds(tmp_path / "app.creds", "app")
    expired = operator.user_creds(tmp_path / "old.creds", "old", expires_in=-60)
    with _server(tmp_path, operator.server_config()) as server:
        url = f"nats://127.0.0.1:{server.port}"
        async with await jetstream.connect(url, user_credentials=str(good)) as js:
            await _round_trip(js, "creds")
        options = ConnectionOptions.from_strings({"servers": url, "creds": str(good)})
        async with await options.connect() as js:
            assert (await kvstore.open_bucket(js, "creds")).name == "creds"
        with pytest.raises(jetstream.AuthenticationError):
            await jetstream.connect(
                url, user_credentials=str(expired), allow_reconnect=False, max_reconnect_attempts=0
            )
        with pytest.raises(jetstream.AuthenticationError):  # no credentials at all
            await jetstream.connect(url, allow_reconnect=False, max_reconnect_attempts=0)
