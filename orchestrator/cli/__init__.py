"""The ``baton`` command line (console script ``baton = baton.cli:main``).

:mod:`baton.cli.app` declares the commands and imports nothing heavy; each command's work
lives in its own module (:mod:`~baton.cli.run`, :mod:`~baton.cli.busops`) and is
imported only when that command runs, so ``baton --help`` stays fast.
"""

from __future__ import annotations

import copy

import typer

from baton.cli.app import app

__all__ = ["app", "app_for", "main"]


def app_for(args: list[str]) -> typer.Typer:
    """The app, with only the command ``args`` name when they begin with one (else all of it).

    Typer builds every command's options — each parameter's type hints read, a converter made —
    before it parses the first argument, and ``baton`` has thirteen commands: the other twelve
    cost ``baton run`` more than its own. Help, ``--version`` and a misspelt command (whose
    error names the nearest ones) get the whole app."""
    if not args or args[0].startswith("-"):
        return app
    named = [c for c in app.registered_commands if _name(c) == args[0]]
    if not named:
        return app
    one = copy.copy(app)
    one.registered_commands = named
    return one


def _name(command: typer.models.CommandInfo) -> str:
    if command.name:
        return command.name
    assert command.callback is not None
    return typer.main.get_command_name(command.callback.__name__)


def main() -> None:
    """Console-script entry point.

    A reader that stops early (``baton run --json | head -1``, ``baton --help | head -1``) ends
    the command quietly with exit 141 wherever stdout breaks: inside a command
    (:func:`~baton.cli.exits.run_async`), in click's own output, or at the final flush here.
    """
    import sys

    from baton.cli.exits import flush_or_quiet, output_closed
    from baton.errors import ExitCode

    try:
        app_for(sys.argv[1:])()
    except BrokenPipeError:  # raised outside run_async (help text, a plain echo)
        output_closed()
    except KeyboardInterrupt:  # Ctrl-C outside run_async (reading settings, a file): one line
        print("baton: interrupted by SIGINT", file=sys.stderr, flush=True)
        raise SystemExit(ExitCode.INTERRUPTED) from None
    finally:
        flush_or_quiet()
