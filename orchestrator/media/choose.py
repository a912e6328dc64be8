"""From the one setting to a store: ``--media`` / ``BATON_MEDIA`` / ``media`` in TOML.

Three forms (``docs/media.md``):

- a directory, as a path or a ``file://`` URL (the default: ``media_dir``, ``./media``):
  ``file://`` URLs, or ``<base_url>/<name>`` when the folder is served (``baton serve``'s
  ``/media``);
- ``s3://bucket/prefix``: an S3-compatible bucket, through the standard ``AWS_*`` variables;
  presigned URLs, or ``<base_url>/<key>`` for a public bucket.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from baton.bus.errors import redact_url
from baton.errors import ConfigError
from baton.media.directory import DirectoryStore
from baton.media.store import MediaStore

DEFAULT_MEDIA = "media"
"""The default: a folder ``media`` in the working directory."""


def media_directory(value: str | Path) -> Path | None:
    """The directory ``value`` names (a path or a ``file://`` URL), or None for a bucket.

    Raises ``ConfigError`` for a URL of another scheme, or a ``file://`` URL of another host.
    """
    if isinstance(value, Path):
        return value
    text = value.strip()
    if not text:
        raise ConfigError("media: empty; give a directory or s3://bucket/prefix")
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme == "s3":
        return None
    if scheme == "file":
        if parts.netloc.lower() not in ("", "localhost"):
            raise ConfigError(f"media {text!r}: a file:// URL must name this machine")
        return Path(unquote(parts.path))
    if "://" in text:
        raise ConfigError(f"media {text!r}: use a directory, file:///path or s3://bucket/prefix")
    return Path(text)


def open_store(
    value: str | Path = DEFAULT_MEDIA,
    *,
    base_url: str | None = None,
    url_expiry_s: float | None = None,
) -> MediaStore:
    """The store the setting ``value`` names; raises ``ConfigError`` for one that cannot be.

    ``base_url`` is where the store is publicly readable (see the module docstring);
    ``url_expiry_s`` how long a bucket's presigned URLs last (7 days by default).
    """
    if base_url is not None and urlsplit(base_url).scheme.lower() not in ("http", "https"):
        raise ConfigError(
            f"media base URL {redact_url(base_url)!r}: must be an http:// or https:// URL"
        )
    directory = media_directory(value)
    if directory is not None:
        return DirectoryStore(directory, base_url=base_url)
    parts = urlsplit(str(value).strip())
    if not parts.netloc:
        raise ConfigError(
            f"media {redact_url(str(value))!r}: name a bucket, as in s3://bucket/prefix"
        )
    if parts.query or parts.fragment:
        raise ConfigError(
            f"media {redact_url(str(value))!r}: no ?query or #fragment in an s3:// URL"
        )
    from baton.media.s3 import MAX_EXPIRY_S, S3Store

    return S3Store(
        parts.netloc,
        unquote(parts.path),
        base_url=base_url,
        url_expiry_s=MAX_EXPIRY_S if url_expiry_s is None else url_expiry_s,
    )
