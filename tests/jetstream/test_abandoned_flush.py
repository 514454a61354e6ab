"""A flush the caller gave up on (it timed out, or its task was cancelled, as Ctrl-C cancels a
closing CLI verb) leaves the connection as it was: the server's late PONG answers that flush
and nothing else. nats-py set a result on the abandoned flush's cancelled future, its reading
task died of ``InvalidStateError`` (logged as "nats: encountered error" with a traceback) and
the connection was dropped and re-established."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import nats.errors
import pytest

import jetstream

pytestmark = pytest.mark.integration


@pytest.fixture
def own_server() -> Iterator[jetstream.EmbeddedServer]:
    """A server of the test's own, to pause without disturbing the session's."""
    with jetstream.EmbeddedServer() as server:
        yield server


async def _abandon_a_flush(
    js: jetstream.JetStream, server: jetstream.EmbeddedServer, how: str
) -> None:
    """A flush whose PING the paused server answers only once the flush was given up."""
    server.pause()
    try:
        if how == "timed out":
            with pytest.raises(nats.errors.FlushTimeoutError):
                await js.nc.flush(timeout=0.2)  # type: ignore[arg-type]  # float works
        else:
            flushing = asyncio.ensure_future(js.nc.flush())
            # The PING is sent (its future queued) before the flush waits for the PONG.
            while not js.nc._pongs:  # the only sign that the PING left
                await asyncio.sleep(0.01)
            flushing.cancel()
            with pytest.raises(asyncio.CancelledError):
                await flushing
    finally:
        server.resume()


@pytest.mark.parametrize("how", ["timed out", "cancelled"])
async def test_the_late_pong_of_an_abandoned_flush_leaves_the_connection_up(
    own_server: jetstream.EmbeddedServer, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    errors: list[Exception] = []
    disconnects: list[bool] = []

    async def on_error(error: Exception) -> None:
        errors.append(error)

    async def on_disconnect() -> None:
        disconnects.append(True)

    async with await jetstream.connect(
        own_server.url, error_cb=on_error, disconnected_cb=on_disconnect
    ) as js:
        await _abandon_a_flush(js, own_server, how)
        await js.nc.flush()  # PONGs come in order: the abandoned flush's is handled first
        assert js.nc.is_connected
    assert errors == [], errors
    assert disconnects in ([], [True]), disconnects  # at most the close's own
    assert "encountered error" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
