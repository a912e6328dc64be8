"""The one error hierarchy of baton.

Every error baton raises on purpose derives from :class:`BatonError`, so an embedder can catch the
whole family in one place. Third-party exceptions (redis, openai, httpx2) are mapped once, at the
boundary where they occur, with ``raise ... from exc``. Messages say what happened, the value
involved, and what to do about it. The other packages add their own subclasses in their own
``errors`` modules; this root lives here because ``bus`` is the bottom layer.

Each class also carries the exit code a command ends with when that error stops it
(:attr:`BatonError.exit_code`, one of :class:`ExitCode`): a new error class says how it ends a
process where it is declared, and the CLI never has to recognise errors by name.
"""

from __future__ import annotations

from enum import IntEnum

from baton.bus.redact import redact_text
from baton.bus.redact import redact_url as redact_url  # its home before bus/redact.py


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


class BusError(BatonError):
    """The message bus failed to do what was asked."""


class BusUnreachable(BusError):
    """The bus backend could not be reached (e.g. Redis is down or the URL is wrong)."""

    exit_code = ExitCode.UNREACHABLE

    def __init__(self, url: str, reason: str) -> None:
        reason = redact_text(reason, url)  # a driver's reason may quote a piece of the URL
        super().__init__(f"cannot reach the bus at {redact_url(url)}: {reason}")
        self.url = url
        self.reason = reason


class BusOutage(BusUnreachable):
    """The bus stayed unreachable longer than the caller's outage bound (``bus_outage_s``).

    Raised instead of retrying on: the message says "bus unreachable", for how long, and the last
    fault, so a command that ends with it (exit 3) tells the user what to fix.
    """

    def __init__(self, last: BusUnreachable, waited_s: float, bound_s: float) -> None:
        super().__init__(
            last.url,
            f"bus unreachable for {waited_s:.1f} s, past the bus outage bound of {bound_s:g} s "
            f"(--bus-outage); last error: {last.reason}",
        )
        self.waited_s = waited_s
        self.bound_s = bound_s


class SessionNotRunning(ConfigError):
    """A message from outside for a session that does not run: the bus has no lead record of it
    (an unknown id, or one whose keys expired), or its lead finished. Nothing was sent (see
    :meth:`~baton.bus.base.Bus.send_if_running`); ``status`` is the record's (``""``: none)."""

    def __init__(self, session: str, status: str) -> None:
        if status:
            said = f"session {session} is not running ({status}): nothing reads its messages"
        else:
            said = f"no session {session} runs on this bus"
        super().__init__(said)
        self.session = session
        self.status = status


class BusClosed(BusError):
    """The bus was used after ``aclose()``; open a new one instead."""


class InvalidEnvelope(BusError):
    """A message failed validation; it goes to the dead-letter stream with ``reason``."""

    exit_code = ExitCode.USAGE

    def __init__(self, reason: str, raw: str | bytes | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.raw = raw
