"""``GET /media/{path}``: the files sub-agent tools wrote, and nothing else on the disk.

The tools write under the media directory (``<media_dir>/<session>/<name>.png``) and report
``file://`` URLs. A path is served only if, after resolving ``..`` and symbolic links, it is a
regular file inside the media directory; anything else is a plain 404 (not 403: the server does
not say what exists outside). Responses carry ``nosniff`` and a sandboxing CSP, so a file a tool
wrote cannot run script on this origin.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response

from baton.server.context import ServerContext

MEDIA_PREFIX = "/media/"
HEADERS = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox"}


def resolve_media(root: Path, relative: str) -> Path | None:
    """The file ``relative`` names under ``root``, or None when it is outside or not a file."""
    if not relative or "\x00" in relative or relative.startswith(("/", "\\")):
        return None
    try:
        target = (root / relative).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not target.is_relative_to(root) or not target.is_file():
        return None
    return target


def public_url(url: str, root: Path) -> str:
    """A ``file://`` URL under the media root as its ``/media/...`` path; others unchanged."""
    parts = urlsplit(url)
    if parts.scheme != "file":
        return url
    path = Path(unquote(parts.path))
    if not path.is_relative_to(root):
        return url
    return MEDIA_PREFIX + quote(path.relative_to(root).as_posix())


async def media_file(request: Request) -> Response:
    ctx = ServerContext.of(request)
    relative = str(request.path_params["path"])
    found = resolve_media(ctx.media_root, relative)
    if found is None:
        raise HTTPException(404, "no such media file")
    return FileResponse(found, headers=HEADERS)
