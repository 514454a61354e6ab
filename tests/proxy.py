"""A TCP proxy on loopback for fault tests: drop traffic in one direction, or cut connections,
optionally triggered when a byte pattern passes from client to server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``127.0.0.1:<target_port>``.

    ``drop_to_client`` / ``drop_to_server`` silently discard bytes in that direction (the
    connection stays up, like a black hole). ``on_client_bytes`` is called with each chunk the
    client sends, before it is forwarded; it returns False to drop the chunk.
    ``bytes_to_client`` counts the bytes forwarded from the server (how much a client read).
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.drop_to_client = False
        self.drop_to_server = False
        self.on_client_bytes: Callable[[bytes], bool] | None = None
        self.bytes_to_client = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"nats://127.0.0.1:{port}"

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_w.close()
            return
        self._writers.update((client_w, server_w))
        for task in (
            asyncio.create_task(self._pump(client_r, server_w, to_server=True)),
            asyncio.create_task(self._pump(server_r, client_w, to_server=False)),
        ):
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, to_server: bool
    ) -> None:
        try:
            while chunk := await reader.read(65536):
                hook = self.on_client_bytes if to_server else None
                if hook is not None and not hook(chunk):
                    continue
                if self.drop_to_server if to_server else self.drop_to_client:
                    continue
                writer.write(chunk)
                if not to_server:
                    self.bytes_to_client += len(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    def cut(self) -> None:
        """Close every open connection (clients will reconnect through the proxy)."""
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
