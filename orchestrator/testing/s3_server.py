"""A throwaway S3-compatible server for tests and benchmarks: moto's server mode (``moto_server``,
the ``test`` extra's ``moto[server]``) on 127.0.0.1, on a free port, stopped on exit.

A real HTTP server in a process of its own, not an in-process mock: what the media store does over
the network (signing, presigned URLs, content types, a missing bucket) is met as it would be by
MinIO or AWS, and ``baton worker`` processes reach it through ``AWS_ENDPOINT_URL`` like any other
store. Readiness is read from the server's own log line, not polled with sleeps.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from types import TracebackType
from typing import Self

from baton.errors import ConfigError
from baton.testing.redis_server import free_port

_READY_MARK = "Running on http://"
ACCESS_KEY = "baton-test-key"
SECRET_KEY = "baton-test-secret"  # moto accepts any credentials; these only have to be there
REGION = "us-east-1"


class S3Server:
    """Owns one ``moto_server`` process; :meth:`env` is how a client (or a process) reaches it."""

    def __init__(self, *, port: int | None = None, start_timeout: float = 30) -> None:
        self.port = port or free_port()
        self.start_timeout = start_timeout
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The standard ``AWS_*`` variables that point a client at this server, and away from
        the shell's own configuration (profiles and credential files are not read)."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def start(self) -> None:
        """Start the server and return once it serves."""
        try:
            import moto.server  # noqa: F401  (only to say clearly what is missing)
        except ModuleNotFoundError as exc:
            raise ConfigError(
                f"the S3 test server needs moto's server mode ({exc.name} is not installed): "
                "pip install 'moto[server]' (in baton's test extra)"
            ) from exc
        args = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        self._proc = subprocess.Popen(
            args,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        ready = threading.Event()
        seen: list[str] = []

        def read() -> None:
            assert self._proc is not None and self._proc.stderr is not None
            for line in self._proc.stderr:  # drained for the server's life: it never blocks
                if len(seen) < 50:
                    seen.append(line)
                if _READY_MARK in line:
                    ready.set()
            ready.set()  # ended: start() sees the exit

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        if not ready.wait(self.start_timeout) or self._proc.poll() is not None:
            self.stop()
            raise RuntimeError(f"moto_server did not start on {self.endpoint}:\n{''.join(seen)}")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if self._reader is not None:
            self._reader.join(10)
        if proc.stderr is not None:
            proc.stderr.close()

    def create_bucket(self, name: str) -> None:
        """Make a bucket on this server."""
        from baton.media.s3 import make_client

        client = make_client(
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )
        try:
            client.create_bucket(Bucket=name)
        finally:
            client.close()

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
