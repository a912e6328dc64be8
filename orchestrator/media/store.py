"""The one interface every tool that makes media writes through, and the rule for media names.

A tool hands over bytes, a name and a content type and gets back the URL a reader opens: where the
bytes go (a folder on this machine, a bucket anyone with the URL can read from) is the process's
setting (``--media``, ``docs/media.md``), never the tool's business. So a worker on another
machine returns URLs the lead, a browser and ``curl`` can open, without the tool changing.

Names are relative keys, ``<session>/<agent>-<digest>.png``: ``/``-separated segments under the
rule of session ids and agent names (:data:`~baton.bus.ids.NAME_PATTERN`), so a name can neither
climb out of a directory store's root (no ``..``, no absolute path) nor say different things to a
file system and a bucket (no ``\\``, no empty segment).
"""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

from baton.bus.ids import NAME_PATTERN
from baton.errors import BatonError

NAME_MAX = 1024
"""The longest media name: S3's limit on a key (the prefix counts there too)."""

_SEGMENT = re.compile(NAME_PATTERN)

CONTENT_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".gif": "image/gif",
    ".txt": "text/plain; charset=utf-8",
}


class MediaError(BatonError, RuntimeError):
    """A medium could not be stored (a bad name, a full disk, a bucket that refused it), or the
    media setting names no store. The message says which store and why, in one line: it is what
    a tool's result tells the model, and what a command prints."""


@runtime_checkable
class MediaStore(Protocol):
    """Where tools put the media they make; see the module docstring."""

    async def put(self, data: bytes, name: str, content_type: str) -> str:
        """Store ``data`` as ``name`` (see :func:`check_name`) and return the URL that reads it.

        Putting the same name again replaces it (a tool re-run after a crash writes the same
        bytes). Raises :class:`MediaError`.
        """
        ...


def check_name(name: str) -> str:
    """``name`` when it is a valid media name (see the module docstring); else ``MediaError``."""
    if not name or len(name) > NAME_MAX:
        raise MediaError(f"media name {name[:80]!r}: must be 1 to {NAME_MAX} characters")
    for segment in name.split("/"):
        if not _SEGMENT.match(segment):
            raise MediaError(
                f"media name {name[:80]!r}: each '/'-separated part must be letters, digits, "
                "'_', '.' or '-', starting with a letter or digit"
            )
    return name


def extension_for(content_type: str) -> str:
    """The file extension of a content type among :data:`CONTENT_TYPES` (``.bin`` otherwise)."""
    bare = content_type.split(";", 1)[0].strip().lower()
    for extension, known in CONTENT_TYPES.items():
        if known.split(";", 1)[0] == bare:
            return extension
    return ".bin"
