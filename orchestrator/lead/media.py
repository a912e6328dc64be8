"""Media URLs a sub-agent reports: ``file://`` ones are taken only inside the media root.

A sub-agent's result lists the media it made, and the lead hands them on: into its context, the
session's answer (appended where the answer left one out), ``session.finished`` and the views.
A ``file://`` URL there is a path on the machines that share the media directory, and one
pointing anywhere else (``file:///etc/passwd``, ``file:///app/media/../../home/x/.ssh/id_rsa``) is
no medium a tool made: a confused model or a forger put it there, and passing it on invites a
reader, a view or a person to open it. So the lead keeps a ``file://`` URL only when its path,
``%``-decoded and with ``.``/``..`` resolved, lies inside the media root, and, for a file that
exists here, when symbolic links do not lead out of it either (a file that does not exist here,
on a worker of another machine, is judged by its path). ``http(s)`` and ``data:`` URLs are not
paths on these machines and pass as they are.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit

LOCAL_HOSTS = ("", "localhost")
"""The hosts a ``file://`` URL may name: this machine."""


def media_problem(url: str, root: Path) -> str | None:
    """Why ``url`` is not taken as a medium under ``root`` (an absolute directory), or None."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "file":
        return None
    if parts.netloc.lower() not in LOCAL_HOSTS:
        return f"it names the host {parts.netloc!r}, not this machine"
    text = unquote(parts.path)
    if "\x00" in text or not text.startswith("/"):
        return "it is not an absolute path"
    path = Path(os.path.normpath(text))
    if not (path.is_relative_to(root) or path.is_relative_to(root.resolve())):
        return f"outside the media root {root}"  # (the tools report resolved paths: either counts)
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):  # not here (another machine's file, or gone): its path says
        return None
    if not real.is_relative_to(root.resolve()):
        return f"a link from the media root {root} to {real}"
    return None


def confine(urls: Sequence[str], root: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """The URLs kept, in order, and those dropped with why."""
    kept: list[str] = []
    dropped: list[tuple[str, str]] = []
    for url in urls:
        problem = media_problem(url, root)
        if problem is None:
            kept.append(url)
        else:
            dropped.append((url, problem))
    return kept, dropped


def media_root(directory: Path) -> Path:
    """The media directory as :func:`media_problem` compares against: absolute, normalised (the
    directory need not exist yet: the tools make it)."""
    return Path(os.path.normpath(directory.absolute()))
