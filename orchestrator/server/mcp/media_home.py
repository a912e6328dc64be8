"""Where ``baton mcp`` keeps media when it was not told.

A desktop host starts its servers in a working directory of its own choosing — often one the user
cannot write (``/`` on macOS) — so the default ``./media`` may not be creatable there. Without a
``media_dir`` (or a ``media`` directory) given, ``baton mcp`` then uses a per-user folder instead of
failing: ``baton/media`` under the platform's place for an application's own data —
``$XDG_STATE_HOME`` (``~/.local/state``) on Linux and other POSIX systems, ``~/Library/Application
Support`` on macOS, ``%LOCALAPPDATA%`` on Windows. A folder that was given is used as given (a
mistake there is the user's to see).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path

from baton.errors import ConfigError

log = logging.getLogger(__name__)


def user_media_dir() -> Path:
    """The per-user media folder (see the module docstring)."""
    home = Path.home()
    if sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    elif sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    else:
        base = Path(os.environ.get("XDG_STATE_HOME") or home / ".local" / "state")
    return base / "baton" / "media"


def writable(folder: Path) -> bool:
    """Whether ``folder`` exists or can be made, and takes a file (tried for real: permission
    bits do not tell, e.g. for root, or on a read-only mount)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".baton-probe-"):
            pass
    except OSError:
        return False
    return True


def default_media_dir(default: Path) -> Path:
    """``default`` (relative to the working directory) when it can be written, else the per-user
    folder; :class:`ConfigError` when neither can."""
    if writable(default):
        return default
    fallback = user_media_dir()
    if not writable(fallback):
        raise ConfigError(
            f"media: neither {default.resolve()} nor {fallback} can be written; give --media-dir"
        )
    log.warning("media: %s cannot be written here; using %s", default.resolve(), fallback)
    return fallback
