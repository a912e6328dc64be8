"""The one place where errors become one line on stderr and an exit code.

A user error (unreachable Redis, a bad URL or config file, an unknown profile, a model endpoint
that refuses) must read as one clear line, never a traceback: :func:`run_async` runs a command's
coroutine and ends it with the code the error carries (``BatonError.exit_code``; the codes are
:class:`~baton.errors.ExitCode`, defined once beside the error root), so the commands
themselves raise ordinary exceptions and nothing here knows error classes by name.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import NoReturn, TypeVar

import typer

from baton.errors import BatonError, ExitCode

T = TypeVar("T")


def fail(message: str, code: int = ExitCode.USAGE, *, command: str = "baton") -> NoReturn:
    """Print ``command: message`` as one line on stderr and exit with ``code``."""
    line = " ".join(message.split())  # one line, whatever the message held
    typer.echo(f"{command}: {line}", err=True)
    raise typer.Exit(code)


def run_async(func: Callable[..., Awaitable[T]], *args: object, command: str = "baton") -> T:
    """Run ``func(*args)`` under anyio, turning baton's errors into one line and an exit code.

    ``BatonError`` (and ``OSError`` from files named on the command line) are user errors: their
    message is printed and the process exits with the error's own code. SIGINT (Ctrl-C), and
    SIGTERM where the command has no handling of its own (:func:`sigterm_interrupts`), exit 130
    with one line naming the signal. Anything else is a bug and keeps its traceback. Every
    command exports telemetry when the standard ``OTEL_*`` variables ask for it
    (:mod:`baton.cli.otel`).
    """
    import anyio

    from baton.cli.otel import exporting

    received: list[str] = []  # the signals that came, in order
    try:
        try:
            with exporting(command), sigterm_interrupts(received):
                return anyio.run(func, *args)
        except BaseExceptionGroup as group:
            raise _user_error(group) from group
    except KeyboardInterrupt:
        interrupted(received[-1] if received else "SIGINT", command)
    except BrokenPipeError:
        output_closed()
    except BatonError as exc:
        fail(str(exc), exc.exit_code, command=command)
    except OSError as exc:
        fail(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), ExitCode.FAILED,
             command=command)  # fmt: skip


def interrupted(signal_name: str, command: str = "baton") -> NoReturn:
    """End with 130 and the one line every non-zero exit prints: which signal stopped it."""
    fail(f"interrupted by {signal_name}", ExitCode.INTERRUPTED, command=command)


@contextmanager
def sigterm_interrupts(received: list[str]) -> Iterator[None]:
    """SIGTERM, for as long as the block runs, does what SIGINT does (and ``SIGTERM`` is
    appended to ``received`` each time it comes).

    Python's default for SIGTERM ends the process at once and silently (exit 143); SIGINT raises
    ``KeyboardInterrupt``, which asyncio turns into a clean cancellation of the running command.
    So SIGTERM is handed to whatever handles SIGINT at that moment (asyncio's own handler while a
    command runs), and the command ends through the same path, with a line saying which signal
    it was. A command that handles SIGTERM itself (``run``, ``worker``, ``serve``:
    ``anyio.open_signal_receiver``) replaces this handler for as long as it does."""

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        received.append("SIGTERM")
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread: signals are not ours to handle
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def output_closed() -> NoReturn:
    """End quietly because whoever read stdout stopped (``baton run --json | head -1``).

    Not an error worth a line: the reader got what it wanted. stdout is pointed at /dev/null
    first, so the interpreter's final flush of what is still buffered cannot fail again and
    print "Exception ignored ... BrokenPipeError" (the recipe of the Python docs, signal module).
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no stdout descriptor to replace: nothing left to flush
        pass
    raise SystemExit(ExitCode.OUTPUT_CLOSED)


def flush_or_quiet() -> None:
    """Flush stdout before the interpreter does, ending quietly if its reader has gone."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        output_closed()


def _user_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one error worth telling a user about inside a task group's exception group.

    A task group wraps whatever its tasks raise; a bus that went away mid-session surfaces as a
    group holding a ``BusUnreachable``. When every leaf is one of ours (or Ctrl-C), the first one
    is the story, a closed stdout first of all (nobody is left to read the rest); anything else
    is a bug, and the group keeps its full traceback.
    """
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        else:
            leaves.append(exc)
    if leaves and all(isinstance(e, BatonError | KeyboardInterrupt | OSError) for e in leaves):
        return next((e for e in leaves if isinstance(e, BrokenPipeError)), leaves[0])
    return group


def is_tty() -> bool:
    """Whether stdout is a terminal (the live view) rather than a pipe or file (plain lines)."""
    return sys.stdout.isatty()
