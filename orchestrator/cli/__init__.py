"""The ``baton`` command line (console script ``baton = baton.cli:main``).

:mod:`baton.cli.app` declares the commands and imports nothing heavy; each command's work
lives in its own module (:mod:`~baton.cli.run`, :mod:`~baton.cli.busops`) and is
imported only when that command runs, so ``baton --help`` stays fast.
"""

from __future__ import annotations

from baton.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point.

    A reader that stops early (``baton run --json | head -1``, ``baton --help | head -1``) ends
    the command quietly with exit 141 wherever stdout breaks: inside a command
    (:func:`~baton.cli.exits.run_async`), in click's own output, or at the final flush here.
    """
    import sys

    from baton.base_errors import ExitCode
    from baton.cli.exits import flush_or_quiet, output_closed

    try:
        app()
    except BrokenPipeError:  # raised outside run_async (help text, a plain echo)
        output_closed()
    except KeyboardInterrupt:  # Ctrl-C outside run_async (reading settings, a file): one line
        print("baton: interrupted by SIGINT", file=sys.stderr, flush=True)
        raise SystemExit(ExitCode.INTERRUPTED) from None
    finally:
        flush_or_quiet()
