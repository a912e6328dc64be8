"""A session's tail of its own event log: the other agents' events, forwarded to its viewers.

The session's own events reach the viewers directly (the lead's text token by token), so they are
skipped here: anything from ``lead``, and ``AgentSpawned`` (the lead logs it, in its sub-agent's
name; the worker that claims the agent logs ``AgentClaimed``). The tail also is the session's pulse
on the bus: it touches the bus every few seconds whatever the lead is doing, resumes at its cursor
after an outage, and reports one longer than ``bus_outage_s`` (which fails the session).
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
from anyio.abc import TaskStatus

from baton.bus.base import Bus
from baton.bus.errors import BusOutage
from baton.bus.events import AgentSpawned, SessionFinished
from baton.bus.tail import tail_events
from baton.lead.prompt import LEAD_NAME
from baton.lead.stream import EventFanout


class ViewerTail:
    """Forwards session ``session``'s logged events on ``bus`` to ``fanout``, riding out an
    outage of up to ``outage_s`` and handing a longer one to ``on_outage``; :attr:`done` is set
    once it has stopped."""

    __slots__ = ("_bus", "_fanout", "_on_outage", "_outage_s", "_session", "done")

    def __init__(
        self,
        bus: Bus,
        session: str,
        fanout: EventFanout,
        *,
        outage_s: float,
        on_outage: Callable[[BusOutage], None],
    ) -> None:
        self._bus = bus
        self._session = session
        self._fanout = fanout
        self._outage_s = outage_s
        self._on_outage = on_outage
        self.done = anyio.Event()

    async def run(self, after: str | None, *, task_status: TaskStatus[None]) -> None:
        """Forward the events logged after ``after`` until ``SessionFinished``."""
        task_status.started()
        events = tail_events(self._bus, self._session, after=after, outage_s=self._outage_s)
        try:
            async for logged in events:
                event = logged.event
                if isinstance(event, SessionFinished):
                    break
                if event.agent == LEAD_NAME or isinstance(event, AgentSpawned):
                    continue
                await self._fanout.publish(event)
        except BusOutage as exc:
            self._on_outage(exc)
        finally:
            self.done.set()
            with anyio.CancelScope(shield=True):
                await events.aclose()
