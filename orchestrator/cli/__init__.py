"""The ``baton`` command line (console script ``baton = baton.cli:main``).

:mod:`baton.cli.app` declares the commands and imports nothing heavy; each command's work
lives in its own module (:mod:`~baton.cli.run`, :mod:`~baton.cli.busops`) and is
imported only when that command runs, so ``baton --help`` stays fast.
"""

from __future__ import annotations

from baton.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point."""
    app()
