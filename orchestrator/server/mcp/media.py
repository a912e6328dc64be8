"""A session's media as MCP content and resources.

The tools write their files under the media directory (``<media_dir>/<session>/<name>``) and
report ``file://`` URLs, which only a host on the same machine can open; a bucket's ``https``
URLs open anywhere. So each medium of a result is:

- a ``resource_link``: for a file of the media directory, its resource URI
  ``baton://media/<session>/<name>`` (``resources/read`` answers it with the file's bytes, on any
  transport and through the same authorisation as the call); for any other URL, the URL itself;
- for a picture of the media directory, also the picture itself as ``image`` content (up to
  :data:`INLINE_MAX` bytes): a host that cannot open a ``file://`` URL of another machine, or
  does not follow resource links, still shows it;
- in ``structuredContent.media_urls``, the URL the host can open: over HTTP a file of the media
  directory is ``<server>/media/<session>/<name>`` (the same token opens it), over stdio its
  ``file://`` URL (the host runs on this machine); other URLs as they are.

``resources/list`` lists the newest files of the media directory (sessions newest first);
``resources/templates/list`` has the URI template.
"""

from __future__ import annotations

import base64
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import anyio
from mcp_types import (
    BlobResourceContents,
    ContentBlock,
    ImageContent,
    Resource,
    ResourceLink,
    ResourceTemplate,
)

from baton.server.media import MEDIA_PREFIX, resolve_media

SCHEME = "baton"
URI_PREFIX = f"{SCHEME}://media/"
URI_TEMPLATE = URI_PREFIX + "{session}/{name}"
INLINE_MAX = 1024 * 1024
"""The largest picture a result carries inline as ``image`` content (larger ones: links only)."""
INLINE_TOTAL = 4 * 1024 * 1024
"""The most bytes of pictures one result carries inline (the rest: links only)."""
LIST_MAX = 200
"""The most files ``resources/list`` names."""


def media_type(name: str) -> str:
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed or "application/octet-stream"


@dataclass(frozen=True, slots=True)
class MediaView:
    """How media look to one request's host: the media directory, and the server's own URL
    (None over stdio: the host is on this machine and opens ``file://`` URLs)."""

    root: Path
    public_base: str | None = None

    def relative(self, url: str) -> str | None:
        """The path of a ``file://`` URL under the media directory, or None."""
        parts = urlsplit(url)
        if parts.scheme != "file":
            return None
        path = Path(unquote(parts.path))
        if not path.is_relative_to(self.root):
            return None
        return path.relative_to(self.root).as_posix()

    def openable(self, url: str) -> str:
        """The URL of a medium this host can open (see the module docstring)."""
        relative = self.relative(url)
        if relative is None or self.public_base is None:
            return url
        return self.public_base + MEDIA_PREFIX + quote(relative)

    def openable_resource(self, uri: str) -> str:
        """The URL this host opens for a resource URI of a medium (other URIs as they are)."""
        relative = relative_of(uri)
        if relative is None:
            return uri
        return self.openable((self.root / relative).as_uri())

    async def content(self, urls: list[str]) -> list[ContentBlock]:
        """The content blocks of the media: each one's link, and small pictures inline (up to
        :data:`INLINE_TOTAL` bytes in all)."""
        blocks: list[ContentBlock] = []
        budget = INLINE_TOTAL
        for url in urls:
            relative = self.relative(url)
            name = Path(unquote(urlsplit(url).path)).name or url[:80]
            kind = media_type(name)
            if relative is None:
                blocks.append(ResourceLink(uri=url, name=name, mime_type=kind))
                continue
            blocks.append(ResourceLink(uri=URI_PREFIX + quote(relative), name=name, mime_type=kind))
            if not kind.startswith("image/"):
                continue
            data = await read_file(self.root, relative, min(INLINE_MAX, budget))
            if data is not None:
                budget -= len(data)
                blocks.append(ImageContent(data=base64.b64encode(data).decode(), mime_type=kind))
        return blocks


async def read_file(root: Path, relative: str, limit: int | None = None) -> bytes | None:
    """The bytes of a file of the media directory (None: not a file there, or over ``limit``)."""

    def read() -> bytes | None:
        found = resolve_media(root, relative)
        if found is None or (limit is not None and found.stat().st_size > limit):
            return None
        return found.read_bytes()

    return await anyio.to_thread.run_sync(read)


def relative_of(uri: str) -> str | None:
    """The media path a ``baton://media/…`` URI names, or None for any other URI."""
    if not uri.startswith(URI_PREFIX):
        return None
    relative = unquote(uri[len(URI_PREFIX) :])
    return relative or None


async def read_resource(root: Path, uri: str) -> BlobResourceContents | None:
    """A media resource's contents, or None when the URI names no file of the directory."""
    relative = relative_of(uri)
    if relative is None:
        return None
    data = await read_file(root, relative)
    if data is None:
        return None
    return BlobResourceContents(
        uri=uri, mime_type=media_type(relative), blob=base64.b64encode(data).decode()
    )


def template() -> ResourceTemplate:
    return ResourceTemplate(
        uri_template=URI_TEMPLATE,
        name="session media",
        description="a file a session's tools made (a picture, a published text)",
    )


async def list_resources(root: Path, sessions: list[str]) -> list[Resource]:
    """The files of ``sessions`` (newest first) in the media directory, at most
    :data:`LIST_MAX`."""

    def walk() -> list[Resource]:
        found: list[Resource] = []
        for session in sessions:
            folder = root / session
            if not folder.is_dir() or folder.is_symlink():
                continue
            for path in sorted(folder.iterdir()):
                relative = f"{session}/{path.name}"
                if resolve_media(root, relative) is None:
                    continue
                found.append(
                    Resource(
                        uri=URI_PREFIX + quote(relative),
                        name=path.name,
                        mime_type=media_type(path.name),
                        size=path.stat().st_size,
                        description=f"made in session {session}",
                    )
                )
                if len(found) >= LIST_MAX:
                    return found
        return found

    return await anyio.to_thread.run_sync(walk)
