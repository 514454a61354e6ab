"""Credentials never show in a repr, str, error or log line, wherever they were given (options,
``servers`` URLs, nkey seed and creds files), and refused credentials fail within seconds on
every connect path (issue 11, findings 7 and 9)."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import socket
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

import jetstream
import kvstore
from jetstream._options import ConnectionOptions
from tests.security.jwts import make_operator

PASSWORD = "S3cretPW-x9"
TOKEN = "tok3n-S3cret-q7"
WRONG = "wr0ng-S3cret-z5"
FAST = 3.0
"""Seconds a refused connect may take (nats-py's defaults made it two minutes)."""


@pytest.fixture(autouse=True)
def _collect() -> Iterator[None]:
    """A refused connection must leave no socket behind: a leak fails the test that made it."""
    yield
    gc.collect()


def _server(tmp: Path, config: str) -> jetstream.EmbeddedServer:
    path = tmp / "server.conf"
    path.write_text(config)
    return jetstream.EmbeddedServer(store_dir=tmp / "store", extra_args=["-c", str(path)])


@pytest.fixture
def password_server(tmp_path: Path) -> Iterator[jetstream.EmbeddedServer]:
    config = f'authorization {{ users = [ {{ user: "alice", password: "{PASSWORD}" }} ] }}\n'
    with _server(tmp_path, config) as server:
        yield server


@pytest.fixture
def token_server(tmp_path: Path) -> Iterator[jetstream.EmbeddedServer]:
    with _server(tmp_path, f'authorization {{ token: "{TOKEN}" }}\n') as server:
        yield server


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _assert_hidden(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text, f"{secret!r} leaked into: {text[:300]!r}"


def _seed_file(tmp: Path, name: str = "user") -> tuple[Path, str, str]:
    nkeys = pytest.importorskip("nkeys")
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(seed).public_key.decode()
    path = tmp / f"{name}.nk"
    path.write_bytes(seed)
    return path, seed.decode(), public


# -- finding 7: reprs, errors and logs ----------------------------------------------------------


def test_connection_options_repr_hides_credentials_in_urls_and_fields(tmp_path: Path) -> None:
    seed_path, seed, _ = _seed_file(tmp_path)
    options = ConnectionOptions.from_strings(
        {
            "servers": f"nats://alice:{PASSWORD}@127.0.0.1:4222, nats://{TOKEN}@127.0.0.1:4223,"
            f"bob:{WRONG}@127.0.0.1:4224",
            "user": "alice",
            "password": PASSWORD,
            "token": TOKEN,
            "nkeySeedFile": str(seed_path),
            "creds": str(tmp_path / "app.creds"),
        }
    )
    for text in (repr(options), str(options), f"{options}", repr([options])):
        _assert_hidden(text, PASSWORD, TOKEN, WRONG, seed)
        assert "127.0.0.1:4222" in text and "127.0.0.1:4224" in text, "hosts stay visible"
    assert "password='***'" in repr(options), "says a password is set"
    assert options.servers[0] == f"nats://alice:{PASSWORD}@127.0.0.1:4222", "kept for connect"


def test_spark_task_and_option_reprs_hide_credentials() -> None:
    """What can land in a Spark plan, a task's repr or a pickled closure's error message."""
    pytest.importorskip("pyspark")
    import kvstore.spark as kv_spark
    from kvstore.spark._options import parse_options
    from objstore.spark._upload import _UploadTask

    raw = {
        "servers": f"nats://alice:{PASSWORD}@127.0.0.1:4222",
        "password": WRONG,
        "token": TOKEN,
        "bucket": "b",
    }
    connection = ConnectionOptions.from_strings(raw)
    task = _UploadTask(connection, "s", "name", "path", None, 1024, 2, None)
    options = parse_options(raw, "read")
    reader = kv_spark.KVReader(options, (("key", False),), 0)
    source = kv_spark.KVDataSource(raw)
    for text in (repr(task), str(task), repr(options), repr(reader), repr(source)):
        _assert_hidden(text, PASSWORD, WRONG, TOKEN)


async def test_refused_and_unreachable_connects_hide_credentials(
    password_server: jetstream.EmbeddedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, every level
    port = password_server.port
    async with await jetstream.connect(f"nats://alice:{PASSWORD}@127.0.0.1:{port}") as js:
        await kvstore.create_bucket(js, "secrets")
        bucket = await kvstore.open_bucket(js, "secrets")
        _assert_hidden(repr(js) + repr(bucket) + str(js), PASSWORD)
    attempts = [
        lambda: jetstream.connect(f"nats://alice:{WRONG}@127.0.0.1:{port}"),
        lambda: jetstream.connect(f"nats://127.0.0.1:{port}", user="alice", password=WRONG),
        lambda: jetstream.connect(f"nats://{TOKEN}@127.0.0.1:{port}"),
        lambda: ConnectionOptions.from_strings(
            {"servers": f"nats://alice:{WRONG}@127.0.0.1:{port}", "connectAttempts": "3"}
        ).connect(),
    ]
    for attempt in attempts:
        with pytest.raises(jetstream.AuthenticationError) as refused:
            await attempt()
        assert f"127.0.0.1:{port}" in str(refused.value), "names the server"
        _assert_hidden(f"{refused.value!s} {refused.value!r}", WRONG, TOKEN, "alice:")
    closed = _closed_port()
    with pytest.raises(jetstream.ConnectionFailedError) as unreachable:
        await jetstream.connect(f"nats://alice:{PASSWORD}@127.0.0.1:{closed}")
    assert "connection refused" in str(unreachable.value)
    _assert_hidden(str(unreachable.value), PASSWORD, "alice:")
    _assert_hidden(caplog.text, PASSWORD, WRONG, TOKEN)  # (a failed first connect logs nothing)


async def test_reconnect_logs_hide_credentials(
    password_server: jetstream.EmbeddedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"nats://alice:{PASSWORD}@127.0.0.1:{password_server.port}"
    async with await jetstream.connect(url, reconnect_time_wait=0.05) as js:
        password_server.stop()
        deadline = time.monotonic() + 10
        while "nats connection" not in caplog.text and time.monotonic() < deadline:
            await _tick()
        assert "nats connection" in caplog.text, "a failed reconnect was logged"
        assert js.nc.is_reconnecting or not js.nc.is_connected
    _assert_hidden(caplog.text, PASSWORD, "alice:")


async def test_nkey_seed_and_creds_stay_out_of_errors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    seed_path, seed, _ = _seed_file(tmp_path)
    _, _, other = _seed_file(tmp_path, "other")  # the server knows another nkey only
    with _server(tmp_path, f'authorization {{ users = [ {{ nkey: "{other}" }} ] }}\n') as server:
        options = ConnectionOptions.from_strings(
            {"servers": server.url, "nkeySeedFile": str(seed_path)}
        )
        with pytest.raises(jetstream.AuthenticationError) as refused:
            await options.connect()
        _assert_hidden(f"{refused.value} {refused.value!r} {options!r} {caplog.text}", seed)
    operator = make_operator()
    expired = operator.user_creds(tmp_path / "old.creds", "old", expires_in=-60)
    secret_lines = [line for line in expired.read_text().splitlines() if line.startswith("SU")]
    (tmp_path / "operator").mkdir()
    with _server(tmp_path / "operator", operator.server_config()) as server:
        options = ConnectionOptions.from_strings(
            {"servers": server.url, "creds": str(expired), "connectAttempts": "5"}
        )
        started = time.monotonic()
        with pytest.raises(jetstream.AuthenticationError) as refused:
            await options.connect()
        assert time.monotonic() - started < FAST
        _assert_hidden(f"{refused.value} {options!r} {caplog.text}", *secret_lines)


async def _tick() -> None:
    await asyncio.sleep(0.02)  # a poll step of a bounded wait, not a synchronisation


# -- finding 9: refused credentials fail fast on every path -------------------------------------


@pytest.mark.parametrize("attempts", [1, 5])
async def test_wrong_password_fails_within_seconds_on_every_path(
    password_server: jetstream.EmbeddedServer, attempts: int
) -> None:
    """Refused credentials are not retried: another try gets the same answer. ``attempts``
    (tries of a first connect to a down server) must not make a refusal slower."""
    port = password_server.port
    paths = {
        "connect, user/password": lambda: jetstream.connect(
            f"nats://127.0.0.1:{port}", user="alice", password=WRONG, connect_attempts=attempts
        ),
        "connect, URL": lambda: jetstream.connect(
            f"nats://alice:{WRONG}@127.0.0.1:{port}", connect_attempts=attempts
        ),
        "ConnectionOptions (Spark)": lambda: ConnectionOptions.from_strings(
            {
                "servers": f"nats://127.0.0.1:{port}",
                "user": "alice",
                "password": WRONG,
                "connectAttempts": str(attempts),
            }
        ).connect(),
        "session": lambda: _enter_session(
            ConnectionOptions.from_strings({"servers": f"nats://alice:{WRONG}@127.0.0.1:{port}"})
        ),
    }
    for path, attempt in paths.items():
        started = time.monotonic()
        with pytest.raises(jetstream.AuthenticationError, match="refused the credentials") as e:
            await attempt()
        took = time.monotonic() - started
        assert took < FAST, f"{path}: {took:.1f}s"
        assert "Authorization Violation" in str(e.value), path


async def test_bad_token_fails_fast_and_other_servers_are_still_tried(
    token_server: jetstream.EmbeddedServer, tmp_path: Path
) -> None:
    """A refusing server is dropped from the first connect, the rest of the list is not: a
    server that refuses the token listed first, then one that takes it, connects."""
    good = f"nats://127.0.0.1:{token_server.port}"
    started = time.monotonic()
    with pytest.raises(jetstream.AuthenticationError):
        await jetstream.connect(good, token=WRONG, connect_attempts=10)
    assert time.monotonic() - started < FAST
    options = ConnectionOptions.from_strings(
        {"servers": good, "token": WRONG, "connectAttempts": "10"}
    )
    started = time.monotonic()
    with pytest.raises(jetstream.AuthenticationError) as refused:
        await options.connect()
    assert time.monotonic() - started < FAST
    _assert_hidden(f"{refused.value} {refused.value!r} {options!r}", WRONG)
    (tmp_path / "other").mkdir()
    config = 'authorization { users = [ { user: "bob", password: "bob-pw" } ] }\n'
    with _server(tmp_path / "other", config) as refusing:
        servers = [f"nats://127.0.0.1:{refusing.port}", f"nats://127.0.0.1:{_closed_port()}", good]
        started = time.monotonic()
        async with await jetstream.connect(
            servers, token=TOKEN, dont_randomize=True, connect_attempts=2, reconnect_time_wait=0.05
        ) as js:
            assert js.nc.connected_url is not None
            assert js.nc.connected_url.port == token_server.port
            assert (await js.account_info()).api.level >= 1
        assert time.monotonic() - started < FAST


async def _enter_session(options: ConnectionOptions) -> None:
    async with options.session():
        raise AssertionError("connected with a wrong password")


@pytest.mark.parametrize("password", ["pa,ss", "p#w", "p?w"])
def test_a_password_that_breaks_the_servers_list_is_never_shown(password: str) -> None:
    """``servers`` is split at commas (and URLs end their authority at ``#``/``?``): a password
    holding one left ``nats://alice:pa`` (a URL without userinfo, shown whole) in the repr."""
    secret = password.split(",")[0].split("#")[0].split("?")[0]  # the part a split leaves
    text = f"nats://alice:{password}@127.0.0.1:4222"
    try:
        options = ConnectionOptions.from_strings({"servers": text})
    except jetstream.ClientValidationError as error:
        shown = "".join(traceback.format_exception(error)) + repr(error.__context__)
        assert f":{secret}" not in shown and "alice" not in shown
        assert "--password" in str(error), "says how to give it"
    else:
        assert f":{secret}" not in repr(options) and "alice" not in repr(options)


@pytest.mark.parametrize("cut", ["#", "?", "/"])
async def test_a_failed_connects_traceback_never_shows_the_password(
    nats_server: jetstream.EmbeddedServer, cut: str
) -> None:
    """A ``#``, ``?`` or ``/`` in a URL's password ends the URL's authority: nats-py's URL
    parser then raised ``Port could not be cast to integer value as 'S3cret'``, chained under
    ConnectionFailedError, so the traceback a Spark task failure or ``log.exception`` prints
    showed the password. Such a URL is now refused before any attempt (a URL cannot carry
    that password), with nothing of it quoted or chained."""
    url = f"nats://alice:S3cret{cut}x@127.0.0.1:{nats_server.port}"
    with pytest.raises(jetstream.ClientValidationError) as failed:
        await jetstream.connect(url, connect_timeout=1)
    shown = "".join(traceback.format_exception(failed.value))
    chain: list[BaseException] = []
    error: BaseException | None = failed.value
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert "S3cret" not in shown and not any("S3cret" in repr(e) for e in chain)
