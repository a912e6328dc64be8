"""A session's event log, followed through bus outages: the tail picks up at its cursor.

``EventLog.tail`` ends with ``BusUnreachable`` once the backend's own few retries are spent (about
two seconds of a dead Redis). Whoever follows a log for a person — the session forwarding its
sub-agents' events to its viewers, ``baton watch``, a server's SSE feeds — must instead wait for
the bus to come back, then carry on right after the last event it handed out, so nothing is
skipped or shown twice. :func:`tail_events` does that through the one retry policy
(:func:`~baton.bus.retry.persist`), bounded by ``outage_s``: past it the tail ends with
``BusOutage`` ("bus unreachable for N s"), which ends a command with exit 3.

A tail that failed is reopened only once the bus answers a ``PING``: reopening subscribes again,
and a subscription waits up to half a minute for Redis to confirm it, which would stretch one
retry far past a short bound while Redis is still down.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

import anyio

from baton.bus.base import Bus
from baton.bus.errors import BusUnreachable
from baton.bus.parts.log import LoggedEvent
from baton.bus.retry import persist


class _Resumable:
    """One tail of the log at a time, reopened after the last cursor handed out."""

    def __init__(self, bus: Bus, session: str, after: str | None, follow: bool) -> None:
        self.bus = bus
        self.session = session
        self.cursor = after
        self.follow = follow
        self._events: AsyncIterator[LoggedEvent] | None = None
        self._failed = False

    async def next(self) -> LoggedEvent | None:
        """The next event (None once a tail without ``follow`` has read everything)."""
        if self._events is None:
            if self._failed:
                await self.bus.ping()  # raises BusUnreachable until the bus is back
            self._events = self.bus.log.tail(self.session, after=self.cursor, follow=self.follow)
        try:
            logged = await anext(self._events, None)
        except BusUnreachable:
            self._failed = True
            await self.close()
            raise
        if logged is not None:
            self.cursor = logged.cursor
        return logged

    async def close(self) -> None:
        """Close the current tail (shielded: a Redis tail holds a subscription until closed)."""
        events, self._events = self._events, None
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            with anyio.CancelScope(shield=True):
                await aclose()


async def tail_events(
    bus: Bus,
    session: str,
    *,
    after: str | None = None,
    follow: bool = True,
    outage_s: float | None = None,
) -> AsyncGenerator[LoggedEvent, None]:
    """``bus.log.tail(session, after=after, follow=follow)``, resumed after a bus fault at the
    last cursor it yielded; raises ``BusOutage`` once the bus has been gone ``outage_s``
    (None: waits for as long as it takes)."""
    tail = _Resumable(bus, session, after, follow)
    try:
        while True:
            logged = await persist(tail.next, f"tail {session}", outage_s=outage_s)
            if logged is None:
                return
            yield logged
    finally:
        await tail.close()
