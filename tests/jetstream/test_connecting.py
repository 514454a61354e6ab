"""Connecting: a bounded first connect that names its cause (a closed port at once, a server that
never answers or refuses the TLS handshake within the budget), connect attempts that retry and
are counted, reconnect attempts that leave no socket behind, and a dead server in the list
skipped but kept for reconnects."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
import ssl
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

import jetstream
from tests.security.pki import make_pki

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("garbage_collected")]


async def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nobody listens once the socket is closed


async def test_a_closed_port_fails_at_once_and_names_the_cause_without_logging_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"nats://127.0.0.1:{_closed_port()}"
    caplog.set_level(logging.DEBUG, logger="jetstream")
    started = time.monotonic()
    with pytest.raises(jetstream.ConnectionFailedError) as failed:  # took 120 s before
        await asyncio.wait_for(jetstream.connect(url), 30)
    assert time.monotonic() - started <= 5.0
    assert "refused" in str(failed.value) and url in str(failed.value)
    # The error says it all; a log line repeating it is noise (it was ~60 lines, then one).
    assert not [r.getMessage() for r in caplog.records if r.name.startswith("jetstream")]


async def test_connect_attempts_retry_the_first_connect(
    own_server: jetstream.EmbeddedServer,
) -> None:
    """Opting in: a server that comes up during the attempts is reached."""
    url = own_server.url
    own_server.stop()
    connecting = asyncio.create_task(
        jetstream.connect(url, connect_attempts=40, reconnect_time_wait=0.1)
    )
    await asyncio.sleep(0.3)  # let a few attempts fail first (not synchronisation: a head start)
    assert not connecting.done()
    own_server.start()
    async with await asyncio.wait_for(connecting, 20) as js:
        await js.account_info()
        assert js.nc.options["max_reconnect_attempts"] == 60, "reconnects keep nats-py's setting"


async def test_connect_attempts_are_counted(caplog: pytest.LogCaptureFixture) -> None:
    url = f"nats://127.0.0.1:{_closed_port()}"
    seen: list[Exception] = []

    async def error_cb(error: Exception) -> None:
        seen.append(error)

    with pytest.raises(jetstream.ConnectionFailedError, match="refused"):
        await jetstream.connect(
            url, connect_attempts=3, reconnect_time_wait=0.01, error_cb=error_cb
        )
    assert len([e for e in seen if isinstance(e, ConnectionRefusedError)]) == 3
    with pytest.raises(jetstream.ClientValidationError):
        await jetstream.connect(url, connect_attempts=0)


async def test_a_server_that_never_answers_times_out_within_connect_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            await reader.read()  # says nothing until the client hangs up
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        started = time.monotonic()
        with pytest.raises(jetstream.ConnectionFailedError, match="timed out"):
            await jetstream.connect(f"nats://127.0.0.1:{port}", connect_timeout=0.5)
        assert time.monotonic() - started < 3.0
    finally:
        server.close()
        await server.wait_closed()


async def test_a_failed_reconnect_attempt_leaves_no_socket(
    own_server: jetstream.EmbeddedServer,
) -> None:
    """The cause of the flaky test_ttl_expires_across_a_full_restart: while nodes restart, a
    reconnect attempt can reach a port whose server does not complete the handshake; nats-py
    then reuses its transport for the next attempt without closing that socket."""
    port = own_server.port
    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # accepts, never sends INFO: the attempt times out

    async with await jetstream.connect(
        own_server.url, connect_timeout=0.2, reconnect_time_wait=0.05, max_reconnect_attempts=-1
    ) as js:
        own_server.kill()
        await _until(lambda: js.nc.is_reconnecting)
        impostor = await asyncio.start_server(silent, "127.0.0.1", port)
        await _until(lambda: len(accepted) >= 3)  # three attempts timed out waiting for INFO
        impostor.close()
        await impostor.wait_closed()
        for writer in accepted:  # the server side of each attempt
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        own_server.start()
        await _until(lambda: js.nc.is_connected)
        await js.account_info()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    leaks = [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert not leaks, [str(w.message) for w in leaks]


async def test_a_refused_tls_handshake_fails_within_the_budget_and_says_tls(
    tmp_path: Path,
) -> None:
    """With default options (reconnects allowed) nats-py hung forever after the refusal."""
    pki = make_pki(tmp_path)
    config = tmp_path / "server.conf"
    config.write_text(f'tls {{ cert_file: "{pki.server_cert}", key_file: "{pki.server_key}" }}\n')
    server = jetstream.EmbeddedServer(store_dir=tmp_path / "store", extra_args=["-c", str(config)])
    with server:
        started = time.monotonic()
        with pytest.raises(jetstream.ConnectionFailedError, match="TLS handshake failed"):
            untrusted = ssl.create_default_context()  # the system trust store lacks our CA
            await asyncio.wait_for(
                jetstream.connect(f"tls://127.0.0.1:{server.port}", tls=untrusted), 30
            )
        assert time.monotonic() - started <= 7.0  # the 5 s budget, then a 1 s close


async def test_a_dead_server_in_the_list_is_skipped_and_kept_for_reconnects(
    nats_server: jetstream.EmbeddedServer,
) -> None:

    dead = f"nats://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    async with await jetstream.connect([dead, nats_server.url], dont_randomize=True) as js:
        assert time.monotonic() - started < 5.0
        await js.account_info()
        pool = {f"{s.uri.hostname}:{s.uri.port}" for s in js.nc._server_pool}
        assert dead.removeprefix("nats://") in pool, "the dead server stays in the pool"


async def test_a_cancel_as_the_tcp_connect_completes_ends_the_connect_at_once() -> None:
    """Ctrl-C (a cancel) that lands in the same loop turn as the TCP connect's completion:
    on Python 3.11 nats-py's ``wait_for`` around the TCP connect swallowed it, and the connect
    went on to wait ``connect_timeout`` (here 60 s) for a silent server's INFO."""
    loop = asyncio.get_running_loop()
    connecting: list[asyncio.Task[jetstream.JetStream]] = []
    writers: list[asyncio.StreamWriter] = []

    def accepted(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)  # silent: never sends INFO
        connecting[-1].cancel()  # the client's connect completes in this same loop turn

    server = await asyncio.start_server(accepted, "127.0.0.1", 0)
    url = f"nats://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        for _ in range(20):
            connecting.append(loop.create_task(jetstream.connect(url, connect_timeout=60)))
            done, _pending = await asyncio.wait(connecting[-1:], timeout=10)
            assert done, "the cancelled connect went on waiting for the server's INFO"
            assert connecting[-1].cancelled()
    finally:
        for task in connecting:
            task.cancel()
        for writer in writers:
            writer.close()
        server.close()
        await server.wait_closed()
