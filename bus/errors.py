"""The bus's errors, under the one root :class:`baton.errors.BatonError`.

The root, ``ConfigError`` and the CLI's :class:`~baton.errors.ExitCode` live in
:mod:`baton.errors`, the bottom layer; they are named here too because the bus raises them
(a bus URL no backend understands is a ``ConfigError``) and older code imports them from here.
"""

from __future__ import annotations

from baton.bus.redact import redact_text
from baton.bus.redact import redact_url as redact_url  # its home before bus/redact.py
from baton.errors import BatonError as BatonError
from baton.errors import ConfigError as ConfigError
from baton.errors import ExitCode as ExitCode


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
    :meth:`~baton.bus.parts.inboxes.Inboxes.send_if_running`); ``status`` is the record's
    (``""``: none)."""

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
