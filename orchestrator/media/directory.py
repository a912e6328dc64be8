"""The directory store: media as files under a folder (``./media`` by default).

The URLs are ``file://`` ones, which only machines that share the folder can open, unless a base
URL says where the folder is served: ``baton serve`` serves it at ``/media`` (only regular files
inside it; :mod:`baton.server.media`), so with ``media_base_url = "http://host:8000/media"`` the
URLs are ``http://host:8000/media/<session>/<name>``.

A ``file://`` URL is the resolved path of the file, inside the root: what the lead's media check
(:mod:`baton.lead.media`) keeps. Files are written to a temporary name and renamed, so a reader
never sees half a picture and a re-run replaces the file whole.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from urllib.parse import quote

import anyio

from baton.media.store import MediaError, check_name


class DirectoryStore:
    """Media under ``root``; ``base_url`` (http or https) is where ``root`` is served, if it is."""

    def __init__(self, root: Path, *, base_url: str | None = None) -> None:
        # Absolute and normalised, not resolved: the lead compares against the same form
        # (baton.lead.media.media_root), and the folder need not exist until the first put.
        self.root = Path(os.path.normpath(Path(root).absolute()))
        self.base_url = base_url.rstrip("/") if base_url else None

    def __repr__(self) -> str:
        served = f", served at {self.base_url}" if self.base_url else ""
        return f"DirectoryStore({str(self.root)!r}{served})"

    def path_of(self, name: str) -> Path:
        """Where ``name`` is stored (a valid name is always inside the root)."""
        return self.root.joinpath(*check_name(name).split("/"))

    async def put(self, data: bytes, name: str, content_type: str) -> str:
        path = self.path_of(name)
        try:
            written = await anyio.to_thread.run_sync(_write, self.root, path, data)
        except OSError as exc:
            raise MediaError(f"cannot store {name} under {self.root}: {exc}") from exc
        if self.base_url is not None:
            return f"{self.base_url}/{quote(name)}"
        return written.as_uri()


def directory_of(store: object, media_dir: Path) -> Path | None:
    """The folder whose files an agent of ``store`` (None: a folder at ``media_dir``) may be
    handed as ``file://`` URLs: its store's, resolved; None for a store that is no folder (a
    bucket), whose agents are handed no ``file://`` URL at all."""
    if store is None:
        return Path(media_dir).resolve()
    if isinstance(store, DirectoryStore):
        return store.root.resolve()
    return None


def _write(root: Path, path: Path, data: bytes) -> Path:
    """Write atomically; the file's resolved path (what its ``file://`` URL names)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.parent.resolve().is_relative_to(root.resolve()):  # a link out of the root
        raise OSError(f"{path.parent} leads out of the media root")
    # A name of its own per write: two agents writing the same picture at once never share one.
    partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}.part")
    try:
        partial.write_bytes(data)
        partial.replace(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return path.resolve()
