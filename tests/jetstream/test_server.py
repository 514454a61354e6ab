"""EmbeddedServer: a real nats-server on loopback, stopped by pid, restartable in place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import jetstream
from jetstream.testing import find_server_binary


async def test_starts_on_loopback_with_jetstream_and_stops_by_pid() -> None:
    async with jetstream.EmbeddedServer() as server:
        assert server.url.startswith("nats://127.0.0.1:")
        pid = server.pid
        assert pid is not None
        async with await jetstream.connect(server.url) as js:
            assert await js.api_level() >= 1
        store = server.store_dir
        assert store.is_dir()
    assert server.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not store.exists(), "a temporary store is removed on exit"


async def test_restart_keeps_port_and_data(tmp_path: Path) -> None:
    with jetstream.EmbeddedServer(store_dir=tmp_path / "store") as server:
        url = server.url
        async with await jetstream.connect(server.url) as js:
            await js.add_stream(jetstream.StreamConfig(name="R", subjects=["r.>"]))
            await js.publish("r.1", b"kept")
        server.kill()
        assert not server.running
        server.start()
        assert server.url == url
        async with await jetstream.connect(server.url) as js:
            assert (await js.stream_info("R")).state.messages == 1
    assert (tmp_path / "store").is_dir(), "a given store directory is left in place"


def test_missing_binary_gives_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NATS_SERVER_BIN", "/nonexistent/nats-server")
    with pytest.raises(jetstream.ServerNotFoundError, match="NATS_SERVER_BIN"):
        jetstream.EmbeddedServer().start()


def test_binary_comes_from_the_wheel() -> None:
    assert find_server_binary().is_file()


def test_bad_arguments_report_the_server_output() -> None:
    with pytest.raises(jetstream.JetStreamError, match="exited"):
        jetstream.EmbeddedServer(extra_args=["--no-such-flag"]).start()


async def test_a_paused_server_times_out_requests_and_recovers_on_resume() -> None:
    async with (
        jetstream.EmbeddedServer() as server,
        # retry_deadline: how long a request keeps retrying a silent server (20 s by default)
        await jetstream.connect(server.url, timeout=0.5, retry_deadline=2) as js,
    ):
        await js.account_info()
        server.pause()
        try:
            with pytest.raises(jetstream.RequestTimeoutError):
                await js.account_info()
        finally:
            server.resume()
        assert (await js.account_info()).api.level >= 1
