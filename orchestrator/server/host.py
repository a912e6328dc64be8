"""The sessions a server runs: each in the server's task group, on the server's bus.

A session started over HTTP outlives the request that started it, so it cannot live in the
request's task; it runs in a task of the :class:`SessionHost`, which the server owns. When the
server stops, the host cancels its sessions gracefully (their sub-agents are told to shut down)
and waits a bounded time for them to write ``session.finished``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import anyio
from anyio.abc import TaskGroup, TaskStatus

from baton.bus.base import Bus
from baton.session import Session, SessionConfig
from baton.subagents.profiles import Profile

log = logging.getLogger(__name__)

STOP_GRACE_S = 5.0


class SessionHost:
    """Starts sessions in ``group`` and keeps the running ones by id (for ``cancel``), each with
    the server's ``defaults`` (and ``bus_outage_s``) where its config does not say otherwise."""

    def __init__(
        self,
        bus: Bus,
        group: TaskGroup,
        profiles: Mapping[str, Profile],
        defaults: Mapping[str, object] | None = None,
        *,
        bus_outage_s: float | None = None,
    ) -> None:
        self.bus = bus
        self.group = group
        self.profiles = dict(profiles)
        self.defaults = dict(defaults or {})
        self.bus_outage_s = bus_outage_s
        self._running: dict[str, Session] = {}
        self._all_done = anyio.Event()
        self._all_done.set()
        self.stopping = False
        """True once the server stops: no session starts any more (``/healthz`` says so)."""

    def is_hosted(self, session: str) -> bool:
        """True while ``session`` runs in this server."""
        return session in self._running

    async def start(self, config: SessionConfig) -> str:
        """Open the session and start it; returns once it is running (its id is usable)."""
        defaults = dict(self.defaults)
        if self.bus_outage_s is not None:
            defaults["bus_outage_s"] = self.bus_outage_s
        unset = {
            name: value for name, value in defaults.items() if name not in config.model_fields_set
        }
        if unset:
            config = config.model_copy(update=unset)
        session_id: str = await self.group.start(self._host, config, name=config.session_id)
        return session_id

    def cancel(self, session: str) -> bool:
        """Cancel a hosted session; False when it does not run here."""
        found = self._running.get(session)
        if found is None:
            return False
        found.cancel()
        return True

    async def aclose(self) -> None:
        """Cancel every running session and wait (bounded) for them to finish."""
        self.stopping = True
        for session in list(self._running.values()):
            session.cancel()
        with anyio.move_on_after(STOP_GRACE_S):
            await self._all_done.wait()

    async def _host(self, config: SessionConfig, *, task_status: TaskStatus[str]) -> None:
        async with Session(config, bus=self.bus) as session:
            self._running[session.id] = session
            self._all_done = anyio.Event()
            try:
                session.start()
                task_status.started(session.id)
                await session.run()
            except Exception as exc:  # one broken session must not stop the server
                log.warning("session %s failed: %s", session.id, exc)
            finally:
                del self._running[session.id]
                if not self._running:
                    self._all_done.set()
