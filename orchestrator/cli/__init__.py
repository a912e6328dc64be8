"""The ``baton`` command line (console script ``baton = orchestrator.cli:main``).

:mod:`orchestrator.cli.app` declares the commands and imports nothing heavy; each command's work
lives in its own module (:mod:`~orchestrator.cli.run`, :mod:`~orchestrator.cli.busops`) and is
imported only when that command runs, so ``baton --help`` stays fast.
"""

from __future__ import annotations

from orchestrator.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point."""
    app()
