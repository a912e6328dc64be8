"""Lay baton out under its import name, ``build/view/baton/``, for the tools that find a module by
its folder (mypy, import-linter's grimp).

The package ships from three folders (``package-dir`` in ``pyproject.toml``): ``orchestrator/`` is
``baton``, ``bus/`` is ``baton.bus``, ``subagents/`` is ``baton.subagents``. Python and pip follow
that mapping; static tools do not read it, and an editable install reaches them only through an
import hook they never run. A fresh copy (about 1 MB, a few milliseconds) is simpler and safer than
a tree of links: nothing stale survives, and a checker can never write through it into the source.
``.ci/check`` maps the copy's paths in their reports back to the folders.
"""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VIEW = ROOT / "build" / "view"


def package_dirs() -> dict[str, str]:
    """The ``package-dir`` mapping, longest import name last so parents are laid first."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    mapping: dict[str, str] = pyproject["tool"]["setuptools"]["package-dir"]
    return dict(sorted(mapping.items(), key=lambda item: item[0].count(".")))


def main() -> int:
    shutil.rmtree(VIEW, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name, folder in package_dirs().items():
        target = VIEW.joinpath(*name.split("."))
        shutil.copytree(ROOT / folder, target, ignore=ignore, dirs_exist_ok=True)
    print(VIEW)
    return 0


if __name__ == "__main__":
    sys.exit(main())
