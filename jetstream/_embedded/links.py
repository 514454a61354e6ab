"""Link: a loopback TCP forwarder between two cluster nodes that can be cut, for partitions.

Threads, not asyncio: :class:`EmbeddedCluster` is synchronous and its links must keep
forwarding while the test's event loop is busy or blocked.
"""

from __future__ import annotations

import contextlib
import socket
import threading

__all__ = ["Link"]

_CHUNK = 65536


class Link:
    """Forwards connections made to ``port`` (on 127.0.0.1; 0 picks a free one, see
    :attr:`port`) to ``target_port``. The port stays bound until :meth:`close`.

    :meth:`cut` closes every forwarded connection and refuses new ones until :meth:`restore`:
    a link down, as the nodes on both ends see it.
    """

    def __init__(self, port: int, target_port: int) -> None:
        self.target_port = target_port
        self._up = True
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", port))
        self.port: int = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept_loop, name=f"link-{port}", daemon=True).start()

    @property
    def up(self) -> bool:
        return self._up

    def cut(self) -> None:
        """Close every forwarded connection; refuse new ones until :meth:`restore`."""
        with self._lock:
            self._up = False
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            _close(sock)

    def restore(self) -> None:
        """Forward new connections again (the nodes reconnect on their own)."""
        self._up = True

    def close(self) -> None:
        self._closed = True
        self.cut()
        _close(self._listener)

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            if not self._up:  # refused at once (the check below closes the race with cut())
                _close(client)
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port), timeout=2)
            except OSError:
                _close(client)
                continue
            server.settimeout(None)
            with self._lock:  # decided with the registration, so a cut() cannot miss it
                accepted = self._up
                if accepted:
                    self._sockets.update((client, server))
            if not accepted:
                _close(client)
                _close(server)
                continue
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(_CHUNK):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)
            with self._lock:
                self._sockets.discard(source)
                self._sockets.discard(sink)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
