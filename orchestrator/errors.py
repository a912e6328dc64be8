"""The root of every error baton raises on purpose, the exit codes they end a command with, and
the distribution's name that install hints give.

This is the bottom layer (``pyproject.toml``, the import-linter contract): every module may import
it and it imports nothing of baton, so the bus, the model client, the engine and the CLI share one
root without the CLI's exit codes living inside any of them. Each layer adds its own subclasses in
its own ``errors`` module (:mod:`baton.bus.errors`, :mod:`baton.llm.errors`,
:mod:`baton.engine.errors`, :mod:`baton.subagents.errors`); third-party exceptions (redis, openai,
httpx2) are mapped once, at the boundary where they occur, with ``raise ... from exc``. Messages
say what happened, the value involved, and what to do about it.

Each class carries the exit code a command ends with when that error stops it
(:attr:`BatonError.exit_code`, one of :class:`ExitCode`): a new error class says how it ends a
process where it is declared, and the CLI never has to recognise errors by name.

An optional extra that is not installed is a usage error every layer may meet (the S3 store, an
MCP or A2A server, telemetry), and its message says what to install: :func:`install_hint` names
the distribution, which is not ``baton`` on PyPI (:data:`DISTRIBUTION`).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The exit codes of every ``baton`` command, defined once."""

    OK = 0
    FAILED = 1
    """The work failed (a session failed, a worker was stopped by force, an unexpected fault)."""
    USAGE = 2
    """A usage or configuration error: fix the command line, the config file or the environment."""
    UNREACHABLE = 3
    """The bus could not be reached."""
    INCOMPLETE = 4
    """The session ended without the work it delegated: no sub-agent delivered a result, or the
    answer cites media nobody produced (status ``incomplete``)."""
    INTERRUPTED = 130
    """Stopped by Ctrl-C (128 + SIGINT), as shells report it."""
    OUTPUT_CLOSED = 141
    """Whoever read the output stopped reading (``baton run --json | head -1``): the process ends
    quietly with the code a shell reports for a tool ended by SIGPIPE (128 + 13)."""


class BatonError(Exception):
    """Root of every error baton raises on purpose.

    ``exit_code`` is how a command ends when this error stops it; subclasses override it, and an
    instance may narrow it where the class alone cannot tell (``ModelError`` for a refused key).
    """

    exit_code: int = ExitCode.FAILED


class ConfigError(BatonError):
    """A setting, URL or file given by the user cannot be used."""

    exit_code = ExitCode.USAGE


DISTRIBUTION = "baton-orchestrator"
"""baton's name on PyPI, which its install hints name: ``baton`` there is an unrelated project
(and several ``baton-*`` names are other agent tools). The import name and the command stay
``baton``."""


def install_hint(extra: str) -> str:
    """The command that installs an optional extra: ``pip install 'baton-orchestrator[s3]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def installed_version() -> str:
    """The installed distribution's version; ``0`` for a checkout run without installing."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0"
