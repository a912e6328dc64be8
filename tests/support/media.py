"""Where a sub-agent's media URL points on this machine."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname


def file_path(url: str) -> Path:
    """The local path of a ``file://`` media URL."""
    return Path(url2pathname(urlsplit(url).path))
