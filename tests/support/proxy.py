"""TCP proxies for failure tests.

:class:`ReplyDroppingProxy` sits in front of a redis-server and can lose one reply: the server
runs the command, the client's connection breaks before the reply arrives, and redis-py sends
the command again on a new connection. The situation every write must survive without applying
twice. :class:`PartitionableLink` carries a replica's link to its primary and can cut it."""

from __future__ import annotations

import itertools
import socket
import threading
from types import TracebackType


class _RequestReplyProxy:
    """Forwards each connection it accepts to ``upstream``, request by request (a subclass's
    ``_serve`` decides what happens to each reply)."""

    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(32)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._upstream)
            threading.Thread(target=self._serve, args=(client, server), daemon=True).start()

    def _serve(self, client: socket.socket, server: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._closed = True
        self._listener.close()


#: What marks a call of ctxstore's Lua on the wire, as a function (``FCALL``, ``FCALL_RO``) or
#: as a script.
LUA_MARKERS: tuple[bytes, ...] = (b"FCALL", b"EVALSHA")
Marker = bytes | tuple[bytes, ...]


def _holds(data: bytes, marker: Marker) -> bool:
    markers = (marker,) if isinstance(marker, bytes) else marker
    return any(one in data for one in markers)


class ReplyDroppingProxy(_RequestReplyProxy):
    """Forwards every connection to ``upstream``; after :meth:`drop_next_reply`, the first
    command containing ``marker`` runs on the server but its reply is thrown away and the
    client's connection closed."""

    def __init__(self, host: str, port: int) -> None:
        self._marker: Marker | None = None
        self._to_drop = 0
        self.dropped = 0
        super().__init__(host, port)

    def drop_next_reply(self, marker: Marker = LUA_MARKERS, *, times: int = 1) -> None:
        """Lose the reply of the next command holding ``marker`` (of the next ``times`` such
        commands: a client that sends it again loses that reply too)."""
        with self._lock:
            self._marker, self._to_drop = marker, times

    def _take_marker(self, data: bytes) -> bool:
        with self._lock:
            if self._marker is not None and _holds(data, self._marker):
                self._to_drop -= 1
                if self._to_drop <= 0:
                    self._marker = None
                return True
            return False

    def _serve(self, client: socket.socket, server: socket.socket) -> None:
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    return
                drop = self._take_marker(data)
                server.sendall(data)
                reply = server.recv(65536)
                if drop:
                    self.dropped += 1
                    return  # the server ran it; the client never hears
                if not reply:
                    return
                client.sendall(reply)
        except OSError:
            return
        finally:
            client.close()
            server.close()

    def __enter__(self) -> ReplyDroppingProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class PartitionableLink:
    """A full-duplex TCP link to ``upstream`` (a replica's connection to its primary) that can
    be cut like a network partition: after :meth:`partition`, nothing passes either way (what
    arrives is dropped), while both ends keep their connections open."""

    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(8)
        self.port: int = self._listener.getsockname()[1]
        self._partitioned = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def partition(self) -> None:
        self._partitioned.set()

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self._listener.accept()
            except OSError:
                return
            if self._partitioned.is_set():  # a partition refuses new connections too
                near.close()
                continue
            try:
                far = socket.create_connection(self._upstream)
            except OSError:
                near.close()
                continue
            with self._lock:
                self._sockets += [near, far]
            threading.Thread(target=self._pump, args=(near, far), daemon=True).start()
            threading.Thread(target=self._pump, args=(far, near), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    return
                if not self._partitioned.is_set():
                    target.sendall(data)
        except OSError:
            return

    def close(self) -> None:
        self._partitioned.set()
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                sock.close()

    def __enter__(self) -> PartitionableLink:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class HangingProxy(_RequestReplyProxy):
    """Forwards every connection to ``upstream``; after :meth:`hang`, the connections open then
    still carry commands to the server, which runs them, but their replies never come back and
    the connections stay open (a connection that froze), while new connections work. Counts
    the commands that carry ``marker``."""

    def __init__(self, host: str, port: int, marker: Marker = LUA_MARKERS) -> None:
        self._marker = marker
        self.sent = 0
        self._hanging: set[int] = set()
        self._serving: set[int] = set()
        # Each connection's own number: an id() of a closed socket can name a new one.
        self._numbers = itertools.count()
        super().__init__(host, port)

    def hang(self) -> None:
        with self._lock:
            self._hanging |= self._serving

    def _serve(self, client: socket.socket, server: socket.socket) -> None:
        with self._lock:
            me = next(self._numbers)
            self._serving.add(me)
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    return
                if _holds(data, self._marker):
                    with self._lock:
                        self.sent += 1
                server.sendall(data)
                reply = server.recv(65536)
                with self._lock:
                    hanging = me in self._hanging
                if not hanging:
                    client.sendall(reply)
        except OSError:
            return
        finally:
            client.close()
            server.close()
