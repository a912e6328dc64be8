"""The S3-compatible store: media as objects in a bucket, read through presigned or public URLs.

Configured the way every AWS tool is, by the standard variables (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``/``AWS_DEFAULT_REGION``,
``AWS_PROFILE`` and the shared config files, instance and container roles) and
``AWS_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL_S3``) for a store that is not AWS: MinIO, Ceph, R2,
moto's server. baton reads none of them itself: the client does, so a worker is configured like
any other program on its machine.

The client is ``boto3`` (the ``s3`` extra), chosen over ``obstore`` for three reasons. It resolves
credentials through the whole standard chain (``AWS_PROFILE``, SSO, shared files, roles), where
``obstore`` reads the variables and roles but not profiles; it is the client every S3-compatible
store documents and tests against; and its calls are plain functions, which run in a worker thread
under anyio on any backend, where ``obstore``'s awaitables belong to asyncio. What it costs: a put
occupies a thread (at most :data:`MAX_THREADS` per store at once), and importing it takes ~0.15 s,
paid only by a process whose setting names a bucket (``benchmarks/media_store.py`` measures puts).

URLs: presigned ``GET`` URLs (SigV4, valid ``url_expiry_s``, 7 days at most) by default, which
open without credentials and without making the bucket public; with ``base_url`` (the bucket's
public address: a CDN, a bucket website, ``http://127.0.0.1:9000/bucket``) plain ones, the key
appended to it, for a bucket whose objects are readable by anyone.
"""

from __future__ import annotations

import importlib.util
import re
import threading
from typing import TYPE_CHECKING
from urllib.parse import quote

import anyio

from baton.errors import ConfigError, install_hint
from baton.media.store import MediaError, check_name

if TYPE_CHECKING:
    from types_boto3_s3 import S3Client

MAX_EXPIRY_S = 7 * 24 * 3600
"""The longest a SigV4 presigned URL may be valid."""
MAX_THREADS = 16
"""Puts in flight at once per store: each holds a thread while the client waits on the network."""
_NO_EXTRA = "an s3:// media store needs the 's3' extra ({name} is not installed): " + install_hint(
    "s3"
)
_BUCKET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{2,254}$")


class S3Store:
    """Media as objects ``<prefix>/<name>`` in ``bucket``; see the module docstring.

    ``client`` replaces the boto3 client the store would make (made on the first put, in a
    thread: making one reads the service model, ~0.1 s).
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        base_url: str | None = None,
        url_expiry_s: float = MAX_EXPIRY_S,
        client: S3Client | None = None,
    ) -> None:
        if not _BUCKET.match(bucket):
            raise ConfigError(f"media bucket {bucket!r}: not a bucket name")
        prefix = prefix.strip("/")
        if prefix:
            try:
                check_name(prefix)
            except MediaError as exc:
                raise ConfigError(f"media prefix {prefix!r}: {exc}") from exc
        if not 1 <= url_expiry_s <= MAX_EXPIRY_S:
            raise ConfigError(
                f"media URL expiry {url_expiry_s:g} s: presigned URLs last 1 s to 7 days"
            )
        if client is None and importlib.util.find_spec("boto3") is None:
            raise ConfigError(_NO_EXTRA.format(name="boto3"))
        self.bucket = bucket
        self.prefix = prefix
        self.base_url = base_url.rstrip("/") if base_url else None
        self.url_expiry_s = int(url_expiry_s)
        self._client = client
        self._making = threading.Lock()
        self._threads = anyio.CapacityLimiter(MAX_THREADS)

    def __repr__(self) -> str:
        shown = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        return f"S3Store({shown!r}{', public' if self.base_url else ''})"

    def key_of(self, name: str) -> str:
        check_name(name)
        return f"{self.prefix}/{name}" if self.prefix else name

    async def put(self, data: bytes, name: str, content_type: str) -> str:
        key = self.key_of(name)
        try:
            # Abandoned on cancellation: a tool that timed out returns at once; the thread's put
            # finishes (or fails) on its own, and a put of the same key again replaces it.
            return await anyio.to_thread.run_sync(
                self._put, key, data, content_type, abandon_on_cancel=True, limiter=self._threads
            )
        except MediaError:
            raise
        except Exception as exc:  # botocore's errors: ClientError, NoCredentialsError, timeouts
            where = f"s3://{self.bucket}/{key}"
            raise MediaError(f"cannot store {name} at {where}: {_one_line(exc)}") from exc

    def _put(self, key: str, data: bytes, content_type: str) -> str:
        client = self.client()
        client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type)
        if self.base_url is not None:
            return f"{self.base_url}/{quote(key)}"
        return client.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=self.url_expiry_s
        )

    def client(self) -> S3Client:
        """The store's client (thread-safe once made); made here on first use."""
        with self._making:
            if self._client is None:
                self._client = make_client()
            return self._client


def make_client(
    *,
    endpoint_url: str | None = None,
    aws_access_key_id: str | None = None,
    aws_secret_access_key: str | None = None,
    region_name: str | None = None,
) -> S3Client:
    """A boto3 S3 client from the standard configuration (``AWS_*``, the shared files), or from
    what is given here instead.

    Signature v4 (presigned URLs any S3-compatible store accepts), bounded connect and read
    timeouts (a store that hangs fails the put, not the worker), the standard retry mode, and a
    connection pool as large as the puts a store runs at once.
    """
    try:
        import boto3
        from botocore.config import Config
    except ModuleNotFoundError as exc:
        raise ConfigError(_NO_EXTRA.format(name=exc.name)) from exc
    config = Config(
        signature_version="s3v4",
        connect_timeout=10,
        read_timeout=30,
        retries={"max_attempts": 3, "mode": "standard"},
        max_pool_connections=MAX_THREADS,
    )
    client: S3Client = boto3.session.Session().client(
        "s3",
        config=config,
        endpoint_url=endpoint_url,
        aws_access_key_id=aws_access_key_id,
        aws_secret_access_key=aws_secret_access_key,
        region_name=region_name,
    )
    return client


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else f"{text[:297]}..."
